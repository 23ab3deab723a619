import { parseCsvPage } from "../support/csv";

export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  instance?: string;
  errorCode: string;
  traceId?: string;
  errors?: Record<string, string[]>;
  [extra: string]: unknown;
}

/** Reads a problem+json response, checking the envelope every error shares. */
export async function problem(res: Response, status: number): Promise<Problem> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected HTTP ${status}, got ${res.status}: ${text.slice(0, 500)}`);
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(text) as Problem;
  expect(body.status).toBe(status);
  expect(body.errorCode).toMatch(/^[A-Z][A-Z_]*$/);
  return body;
}

export async function csv(res: Response) {
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`expected HTTP 200, got ${res.status}: ${body.toString().slice(0, 500)}`);
  return parseCsvPage(body);
}

export const qs = (params: Record<string, string | number | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) p.set(k, String(v));
  return `?${p.toString()}`;
};
