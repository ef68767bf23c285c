CREATE TABLE "provider_balances" (
	"provider" text NOT NULL,
	"key_ref" text NOT NULL,
	"region" text NOT NULL,
	"balance_micros" bigint NOT NULL,
	"sampled_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_balances_provider_sampled_at_region_pk" PRIMARY KEY("provider","sampled_at","region")
);
