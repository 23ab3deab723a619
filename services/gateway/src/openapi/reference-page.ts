import { readFileSync } from "node:fs";

/**
 * The human-readable API reference at GET /docs: Redoc's standalone bundle renders the OpenAPI
 * document the gateway serves. Every asset comes from the gateway itself (the `redoc` package in
 * node_modules), never a CDN, so the page works on networks without internet access; the
 * Content-Security-Policy makes the browser refuse anything else.
 */
export const REFERENCE_PAGE_PATH = "/docs";
export const REDOC_SCRIPT_PATH = "/docs/assets/redoc.standalone.js";

// Redoc injects its styles (styled-components) and starts its search index in a blob: worker.
export const REFERENCE_PAGE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "worker-src 'self' blob:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
].join("; ");

export function referencePageHtml(openApiPath: string, title: string): string {
  const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<redoc spec-url="${escape(openApiPath)}" expand-responses="400,401,404,405,429,431,500,503" required-props-first="true" hide-download-button="false"></redoc>
<script src="${escape(REDOC_SCRIPT_PATH)}"></script>
</body>
</html>
`;
}

let redocScript: Buffer | undefined;

/** The Redoc bundle, read once from the installed package. */
export function redocStandaloneScript(): Buffer {
  redocScript ??= readFileSync(require.resolve("redoc/bundles/redoc.standalone.js"));
  return redocScript;
}
