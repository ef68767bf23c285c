// `import x from "./file.sql" with { type: "text" }`: Bun hands the file's text (and embeds it in compiled binaries).
declare module "*.sql" {
  const text: string;
  export default text;
}
