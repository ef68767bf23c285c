CREATE TABLE "provider_plan_shares" (
	"key_ref" text PRIMARY KEY NOT NULL,
	"threads" integer NOT NULL,
	"valid_until" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
