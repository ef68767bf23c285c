CREATE INDEX "tasks_created_idx" ON "tasks" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "tasks_state_created_idx" ON "tasks" USING btree ("state","created_at","id");--> statement-breakpoint
CREATE INDEX "tasks_idempotency_key_idx" ON "tasks" USING btree ("idempotency_key") WHERE "tasks"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "tasks_sitekey_idx" ON "tasks" USING btree (("params"->>'sitekey')) WHERE ("tasks"."params"->>'sitekey') is not null;--> statement-breakpoint
CREATE INDEX "tasks_pageurl_idx" ON "tasks" USING btree (("params"->>'pageurl') text_pattern_ops) WHERE ("tasks"."params"->>'pageurl') is not null;