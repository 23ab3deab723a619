/**
 * Runs a script's `main` when its file is the process's entry point (not when a test imports it):
 * exits with the code `main` returns (0 when it returns nothing), or prints a thrown error's message
 * (never a stack trace), after `label failed: ` when a label is given, and exits 1.
 */
export function runAsScript(mod: NodeModule, main: (argv: string[]) => number | void | Promise<number | void>, label?: string): void {
  if (require.main !== mod) return;
  Promise.resolve()
    .then(() => main(process.argv.slice(2)))
    .then(
      (code) => process.exit(code ?? 0),
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        process.stderr.write(`${label ? `${label} failed: ` : ""}${message}
`);
        process.exit(1);
      },
    );
}
