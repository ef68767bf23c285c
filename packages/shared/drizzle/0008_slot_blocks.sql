CREATE TABLE "provider_slot_blocks" (
	"key_ref" text NOT NULL,
	"owner" text NOT NULL,
	"size" integer NOT NULL,
	"threads" integer NOT NULL,
	"wanted" integer NOT NULL,
	"lease_until" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_slot_blocks_key_ref_owner_pk" PRIMARY KEY("key_ref","owner")
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "claimed_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "provider_slot_blocks_owner_idx" ON "provider_slot_blocks" USING btree ("owner");