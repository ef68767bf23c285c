CREATE TABLE "provider_slots" (
	"key_ref" text NOT NULL,
	"slot" integer NOT NULL,
	"owner" text,
	"task_id" uuid,
	"lease_until" timestamp with time zone,
	CONSTRAINT "provider_slots_key_ref_slot_pk" PRIMARY KEY("key_ref","slot")
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"delivery_id" text PRIMARY KEY NOT NULL,
	"task_id" uuid NOT NULL,
	"state" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_status" integer,
	"last_error" text,
	"delivered_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "deadline_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "callback_url" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "redrives" integer DEFAULT 0 NOT NULL;