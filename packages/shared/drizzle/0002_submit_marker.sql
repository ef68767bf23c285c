ALTER TABLE "tasks" ADD COLUMN "submit_started_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "submit_owner" text;