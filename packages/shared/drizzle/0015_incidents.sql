CREATE TABLE "incidents" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"key" text NOT NULL,
	"kind" text NOT NULL,
	"region" text NOT NULL,
	"summary" text NOT NULL,
	"started_at" timestamp with time zone NOT NULL,
	"detected_at" timestamp with time zone,
	"recovered_at" timestamp with time zone,
	"ended_at" timestamp with time zone,
	"tasks_affected" integer,
	"rpo" integer,
	"rto_ms" bigint,
	"extra_paid" integer,
	"extra_micros" bigint,
	"detail" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"timeline" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"opened_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "incidents_key_unique" UNIQUE("key")
);
--> statement-breakpoint
CREATE INDEX "incidents_started_idx" ON "incidents" USING btree ("started_at");