CREATE TABLE "warm_pools" (
	"id" uuid PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"name" text NOT NULL,
	"type" text NOT NULL,
	"params" jsonb NOT NULL,
	"priority" text NOT NULL,
	"size" integer NOT NULL,
	"max_age_ms" integer NOT NULL,
	"misses" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "pool_id" uuid;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "pool_taken_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "pool_wasted_at" timestamp with time zone;--> statement-breakpoint
CREATE UNIQUE INDEX "warm_pools_owner_name_idx" ON "warm_pools" USING btree ("owner","name") WHERE deleted_at is null;--> statement-breakpoint
CREATE INDEX "warm_pools_live_idx" ON "warm_pools" USING btree ("created_at") WHERE deleted_at is null;--> statement-breakpoint
CREATE INDEX "tasks_pool_idx" ON "tasks" USING btree ("pool_id") WHERE "tasks"."pool_id" is not null;--> statement-breakpoint
CREATE INDEX "tasks_pool_open_idx" ON "tasks" USING btree ("pool_id","completed_at") WHERE "tasks"."pool_id" is not null and "tasks"."pool_taken_at" is null and "tasks"."pool_wasted_at" is null and "tasks"."state" in ('queued','solving','retrying','completed');