ALTER TABLE "tasks" ADD COLUMN "charge_provider_task_id" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "charge_provider" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "charge_region" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "charge_solver_version" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "charge_micros" bigint;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "charge_price_source" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "charged_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "tasks_charged_idx" ON "tasks" USING btree ("charged_at") WHERE "tasks"."charged_at" is not null;--> statement-breakpoint
CREATE INDEX "tasks_charged_owner_idx" ON "tasks" USING btree ("owner","charged_at") WHERE "tasks"."charged_at" is not null;--> statement-breakpoint
CREATE INDEX "tasks_charged_version_idx" ON "tasks" USING btree ("charge_solver_version","id") WHERE "tasks"."charged_at" is not null;--> statement-breakpoint
-- Every ledger entry, one relation for every reader: the ledger table's rows (refunds, charges
-- booked before this migration, a task's further charges, the charges of rows retention deleted)
-- and the charge kept on each completed task's row. Written by hand: drizzle-kit does not manage
-- this view (packages/shared/src/db/schema/ledger.ts declares it for reading).
CREATE VIEW "ledger_all" AS
  SELECT "task_id", "kind", "provider_task_id", "owner", "task_type", "provider", "region", "solver_version",
         "amount_micros", "price_source", "created_at"
  FROM "ledger"
  UNION ALL
  SELECT "id", 'charge', "charge_provider_task_id", "owner", "type", "charge_provider", "charge_region",
         "charge_solver_version", "charge_micros", "charge_price_source", "charged_at"
  FROM "tasks" WHERE "charged_at" IS NOT NULL;
