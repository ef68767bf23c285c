import { type AuditRow, auditLog, type Db } from "@pipeline/shared/db";
import { desc } from "drizzle-orm";

export interface AuditEntry {
  actor: string;
  action: string;
  /** Names and hash references only: never a key or a token. */
  detail: Record<string, unknown>;
}

export async function recordAudit(db: Db, e: AuditEntry): Promise<AuditRow> {
  const [row] = await db.insert(auditLog).values(e).returning();
  return row!;
}

export async function recentAudit(db: Db, limit = 50): Promise<AuditRow[]> {
  return db.select().from(auditLog).orderBy(desc(auditLog.id)).limit(limit);
}
