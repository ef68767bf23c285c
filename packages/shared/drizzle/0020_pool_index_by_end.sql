DROP INDEX "tasks_pool_idx";--> statement-breakpoint
CREATE INDEX "tasks_pool_idx" ON "tasks" USING btree ("pool_id","completed_at") WHERE "tasks"."pool_id" is not null;