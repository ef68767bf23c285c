CREATE TABLE "tasks" (
	"id" uuid PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"idempotency_key" text,
	"request_hash" text NOT NULL,
	"region" text NOT NULL,
	"type" text NOT NULL,
	"priority" text NOT NULL,
	"params" jsonb NOT NULL,
	"state" text NOT NULL,
	"version" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"provider_id" text,
	"provider_submissions" integer DEFAULT 0 NOT NULL,
	"provider_polls" integer DEFAULT 0 NOT NULL,
	"lease_owner" text,
	"lease_until" timestamp with time zone,
	"token" text,
	"user_agent" text,
	"token_expires_at" timestamp with time zone,
	"error_code" text,
	"error_message" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "tasks_open_idx" ON "tasks" USING btree ("state","updated_at") WHERE state in ('queued','solving','retrying');--> statement-breakpoint
CREATE INDEX "tasks_owner_created_idx" ON "tasks" USING btree ("owner","created_at");