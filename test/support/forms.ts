/**
 * Helpers for black-box tests of form datasets over HTTP: an organization of one's own loaded
 * through `applyDocument`, listing look-ups, bounded polling for the schema service's asynchronous
 * maintenance, and the paging loop of docs/contract.md §4.
 */
import { randomUUID } from "node:crypto";
import { applyDocument, type ApplyDocumentInput, type FieldInput } from "@exportsvc/exportctl";
import type { E2E } from "./fixture";
import { parseCsvPage, type CsvPage } from "./csv";

export interface ListedColumn { key: string; dataType: string; label?: string }
export interface ListedDataset {
  key: string;
  displayName?: string;
  parentDataset?: string;
  childDatasets: string[];
  columns: ListedColumn[];
  links: { csv: string; deletions?: string };
  rewriteToken?: string;
  changeToken: string;
}

export type Row = Record<string, string>;
export type Params = Record<string, string | number | undefined>;
export type ApplyBody = Omit<ApplyDocumentInput, "organization">;

/** Form datasets are maintained asynchronously (usually milliseconds): poll, never sleep a fixed time. */
export const FORM_DATASET_WAIT_MS = 10_000;

/** Polls `probe` until it returns a value other than undefined/false, failing with `what` after the bound. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = FORM_DATASET_WAIT_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Stable random ids by name within one test: `id("form")` is the same uuid every time it is asked. */
export function idFactory(): (name: string) => string {
  const ids = new Map<string, string>();
  return (name) => {
    if (!ids.has(name)) ids.set(name, randomUUID());
    return ids.get(name)!;
  };
}

export const qs = (params: Params = {}) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
};

export const csvPath = (key: string, params: Params = {}) => `/v1/datasets/${encodeURIComponent(key)}/csv${qs(params)}`;

export interface FormOrganization {
  organizationId: string;
  secret: string;
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  /** Loads an apply document (without `organization`) into this organization. */
  apply(doc: ApplyBody): Promise<void>;
  listing(): Promise<ListedDataset[]>;
  /** The listing entry of `key`, or undefined. */
  dataset(key: string): Promise<ListedDataset | undefined>;
  /** Waits until the listing has `key` (and `until` holds for it), returning the entry. */
  waitForDataset(key: string, until?: (d: ListedDataset) => boolean): Promise<ListedDataset>;
  /** One CSV page of `key`; fails on anything but 200. */
  page(key: string, params?: Params): Promise<CsvPage>;
  /** The whole dataset with the loop of docs/contract.md §4 at `limit`. */
  pageAll(key: string, limit?: number): Promise<{ rows: Row[]; pages: CsvPage[] }>;
}

/** A new organization enabled for export, with its own key, so a test that mutates data interferes with nothing. */
export async function formOrganization(e2e: E2E, doc?: ApplyBody): Promise<FormOrganization> {
  const { organizationId, secret } = await e2e.newOrganization();
  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${e2e.baseUrl}${path}`, { headers: { Authorization: `Bearer ${secret}`, ...headers } });
  const listing = async () => {
    const res = await get("/v1/datasets");
    if (res.status !== 200) throw new Error(`listing: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as ListedDataset[];
  };
  const dataset = async (key: string) => (await listing()).find((d) => d.key === key);
  const page = async (key: string, params: Params = {}) => {
    const res = await get(csvPath(key, params));
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) throw new Error(`${key}${qs(params)}: HTTP ${res.status} ${body.toString().slice(0, 500)}`);
    return parseCsvPage(body);
  };
  const org: FormOrganization = {
    organizationId,
    secret,
    get,
    apply: async (body) => {
      await applyDocument(e2e.pool, { organization: organizationId, ...body } as ApplyDocumentInput);
    },
    listing,
    dataset,
    waitForDataset: (key, until = () => true) =>
      waitFor(`dataset ${key} in the listing`, async () => {
        const d = await dataset(key);
        return d && until(d) ? d : undefined;
      }),
    page,
    pageAll: (key, limit = 5000) => pageAll((params) => page(key, params), limit),
  };
  if (doc) await org.apply(doc);
  return org;
}

/** The loop of docs/contract.md §4: no cursor, then the last row's `_cursor`, until a page has fewer rows than `limit`. */
export async function pageAll(fetchPage: (params: Params) => Promise<CsvPage>, limit: number): Promise<{ rows: Row[]; pages: CsvPage[] }> {
  const rows: Row[] = [];
  const pages: CsvPage[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await fetchPage({ limit, cursor });
    pages.push(page);
    rows.push(...page.rows);
    if (page.rows.length < limit) return { rows, pages };
    cursor = page.rows[page.rows.length - 1]._cursor;
    if (pages.length > 1000) throw new Error("paging did not end");
  }
}

/** Field builders for apply documents (`docs/apply-format.md`, forms). */
export const field = {
  text: (id: string, key: string, label = key) => ({ id, key, label, type: "text" as const }),
  number: (id: string, key: string, label = key) => ({ id, key, label, type: "number" as const }),
  yesNo: (id: string, key: string, label = key) => ({ id, key, label, type: "yesNo" as const }),
  grid: (id: string, key: string, label: string, fields: ApplyFields) => ({ id, key, label, type: "grid" as const, fields }),
};
export type ApplyFields = FieldInput[];

/** A site in UTC for documents that need one. */
export const site = (id: string, name = "Main Site", timeZone = "UTC") => ({ id, name, timeZone });

export const ENVELOPE_COLUMNS: Array<[string, string]> = [
  ["id", "uuid"],
  ["record_id", "text"],
  ["site_id", "uuid"],
  ["site_name", "text"],
  ["site_path", "text"],
  ["status", "text"],
  ["is_archived", "boolean"],
  ["started_at", "dateTime"],
  ["started_at_local", "localDateTime"],
  ["completed_at", "dateTime"],
  ["completed_at_local", "localDateTime"],
  ["last_modified", "dateTime"],
  ["last_modified_local", "localDateTime"],
];
