ALTER TABLE "tasks" ADD COLUMN "not_before" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "need_by" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "start_at" timestamp with time zone;