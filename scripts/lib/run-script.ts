import { inspect } from "node:util";

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
        process.stderr.write(`${label ? `${label} failed: ` : ""}${describeError(err)}
`);
        process.exit(1);
      },
    );
}

/** A thrown value as one line: an error's message, a string, or else its inspection (never a stack trace). */
export function describeError(err: unknown): string {
  if (err instanceof Error && err.message) return err.message;
  if (typeof err === "string" && err) return err;
  return inspect(err, { depth: 2, breakLength: Infinity });
}
