CREATE TABLE "ledger" (
	"task_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"provider_task_id" text NOT NULL,
	"owner" text NOT NULL,
	"task_type" text NOT NULL,
	"provider" text NOT NULL,
	"region" text NOT NULL,
	"solver_version" text NOT NULL,
	"amount_micros" bigint NOT NULL,
	"price_source" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ledger_task_id_kind_provider_task_id_pk" PRIMARY KEY("task_id","kind","provider_task_id")
);
--> statement-breakpoint
CREATE TABLE "task_reports" (
	"task_id" uuid PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"accepted" boolean NOT NULL,
	"task_type" text NOT NULL,
	"sitekey" text,
	"region" text NOT NULL,
	"provider_task_id" text NOT NULL,
	"provider_key_ref" text NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_reply" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "ledger_owner_created_idx" ON "ledger" USING btree ("owner","created_at");--> statement-breakpoint
CREATE INDEX "ledger_created_idx" ON "ledger" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "task_reports_due_idx" ON "task_reports" USING btree ("next_attempt_at") WHERE state = 'pending';