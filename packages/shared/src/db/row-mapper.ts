import { getTableColumns, type InferSelectModel, type Table } from "drizzle-orm";

/**
 * Maps a row read with raw SQL (snake_case column names, driver values) to the shape drizzle's
 * own select returns for the table (camelCase keys, Dates, parsed JSON): batched statements
 * (`UPDATE … FROM unnest(…) RETURNING t.*`) hand back the same TaskRow a drizzle query would.
 */
export function driverRowMapper<T extends Table>(table: T): (raw: Record<string, unknown>) => InferSelectModel<T> {
  const columns = Object.entries(getTableColumns(table)).map(([key, column]) => ({ key, name: column.name, column }));
  return (raw) => {
    const out: Record<string, unknown> = {};
    for (const { key, name, column } of columns) {
      const v = raw[name];
      out[key] = v === null || v === undefined ? null : column.mapFromDriverValue(v);
    }
    return out as InferSelectModel<T>;
  };
}
