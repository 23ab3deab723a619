/**
 * Conformance, black-box over HTTP against the four services as processes: the security review's
 * cases (issue 12; docs/security.md lists every case and the test covering it).
 */
import { connect } from "node:net";
import { startE2E, type E2E } from "../support/fixture";
import { csvPath, field, formOrganization, idFactory, site, waitFor } from "../support/forms";
import { problem } from "./helpers";

/** Sends raw bytes; resolves with what the server wrote until it closed the connection. */
function exchange(baseUrl: string, raw: string): Promise<{ head: string; body: string }> {
  const { port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1", () => socket.write(raw));
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer to ${JSON.stringify(raw.slice(0, 60))}: ${text.slice(0, 200)}`));
    }, 30_000);
    socket.on("data", (chunk) => (text += chunk.toString("latin1")));
    socket.on("close", () => {
      clearTimeout(timer);
      const at = text.indexOf("\r\n\r\n");
      resolve({ head: at < 0 ? text : text.slice(0, at), body: at < 0 ? "" : text.slice(at + 4) });
    });
    socket.on("error", () => undefined);
  });
}

/** A small seeded PRNG (mulberry32), so a failing fuzz case can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const serverErrors = (e2e: E2E) =>
  Object.values(e2e.stack.logs)
    .flat()
    .join("")
    .split("\n")
    .filter((line) => /"status":5\d\d/.test(line) && /"errorCode":"INTERNAL_ERROR"/.test(line));

describe("conformance: the security review's cases", () => {
  let e2e: E2E;
  beforeAll(async () => {
    e2e = await startE2E({ serviceEnv: { gateway: { HTTP_HEADERS_TIMEOUT_MS: "2000" } } });
  }, 120_000);
  afterAll(() => e2e?.stop());

  it("text PostgreSQL cannot take, end to end: the NUL key of the report and its relatives are 404/400, never a 5xx", async () => {
    const before = serverErrors(e2e).length;
    for (const key of ["x%00", "%00", "resources_suppliers%00", "x%C3%28", "%ED%A0%80", "%FF%FE", "%C0%80", "x%G0"]) {
      const body = await problem(await e2e.get(`/v1/datasets/${key}/csv`), 404);
      expect(body.errorCode).toBe("DATASET_NOT_FOUND");
      expect(body.detail).not.toMatch(/[\u0000<>]/);
    }
    for (const query of ["cursor=%00", "cursor=%ED%A0%80", "after=%C3%28", "limit=1%00", "unknown=%00", "modifiedSince=%FF"]) {
      const body = await problem(await e2e.get(`/v1/datasets/resources_suppliers/csv?${query}`), 400);
      expect(body.errorCode).toBe("INVALID_PARAMETER");
      expect(Object.keys(body.errors ?? {})).toContain(query.split("=")[0]);
    }
    expect(serverErrors(e2e).length).toBe(before);
  });

  it("fuzzed paths and parameters: every answer is a problem+json 4xx (or a 200), none a 5xx, none hangs", async () => {
    const random = prng(20261123);
    const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
    const bytes = (n: number) => Array.from({ length: n }, () => `%${Math.floor(random() * 256).toString(16).padStart(2, "0")}`).join("");
    const text = (n: number) => Array.from({ length: n }, () => pick(["a", "Z", "_", "-", ".", "~", "%", "%2", "+", "é", "😀", "'", "<", "\\"])).join("");
    const fragment = () => (random() < 0.5 ? bytes(1 + Math.floor(random() * 8)) : encodeURI(text(1 + Math.floor(random() * 12))).replace(/%(?![0-9A-F]{2})/g, "%25"));
    const keys = ["resources_suppliers", "deviations", "supplier_audit", "resources_lots", "no_such"];
    const params = ["cursor", "limit", "after", "afterRowIndex", "modifiedSince", "from", "to", "bogus"];
    const paths: string[] = [];
    for (let i = 0; i < 240; i++) {
      const key = random() < 0.5 ? pick(keys) : random() < 0.5 ? fragment() : pick(keys) + fragment();
      const prefix = pick(["/v1/datasets", "/v1/datasets", "/V1/datasets", "/v1/DATASETS", "/v1//datasets", "/v1/v1/datasets"]);
      const suffix = pick(["/csv", "/csv", "/CSV", "/csv/", ""]);
      const query = Array.from({ length: Math.floor(random() * 4) }, () => `${random() < 0.8 ? pick(params) : fragment()}=${random() < 0.3 ? "x".repeat(Math.floor(random() * 3000)) : fragment()}`).join("&");
      paths.push(`${prefix}/${key}${suffix}${query ? `?${query}` : ""}`);
    }
    const before = serverErrors(e2e).length;
    const statuses = new Map<number, number>();
    // Four at a time: within the organization's five slots, bodies read so every slot frees.
    for (let i = 0; i < paths.length; i += 4) {
      await Promise.all(
        paths.slice(i, i + 4).map(async (path) => {
          const res = await e2e.get(path, {}).catch((err: Error) => {
            throw new Error(`${path}: ${err.message}`);
          });
          const signal = AbortSignal.timeout(30_000);
          await Promise.race([res.arrayBuffer(), new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error(`${path}: hung`))))]);
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          expect({ path, status: res.status < 500 }).toEqual({ path, status: true });
          if (res.status >= 400) expect({ path, type: res.headers.get("content-type") }).toEqual({ path, type: "application/problem+json" });
        }),
      );
    }
    expect([...statuses.keys()].some((s) => s >= 400)).toBe(true);
    expect(serverErrors(e2e).length).toBe(before);
  }, 300_000);

  it("a site time zone PostgreSQL does not know: apply refuses it naming the place; written anyway, it blocks the form like a blank zone, and the 503 shows none of the database's text", async () => {
    const id = idFactory();
    const org = await formOrganization(e2e, {
      sites: [site(id("site"), "Olympus Base", "UTC")],
      forms: [{ id: id("form"), name: "Dome Check", recordPrefix: "DC", fields: [field.text(id("f:t"), "t", "T")] }],
      submissions: [{ id: id("sub"), formId: id("form"), siteId: id("site"), status: "Completed", values: { t: "ok" } }],
    });
    await waitFor("the Dome Check submission", async () => (await org.page("dome_check")).rows.length === 1);
    await expect(org.apply({ sites: [site(id("site"), "Olympus Base", "US/Pacific-New")] })).rejects.toThrow(/sites\[0\]\.timeZone: "US\/Pacific-New" is not a time zone PostgreSQL knows/);

    // Another loader wrote it straight into the source.
    await e2e.pool.query("UPDATE sites SET time_zone = 'Mars/Olympus' WHERE organization_id = $1 AND id = $2", [org.organizationId, id("site")]);
    await org.apply({ forms: [{ id: id("form"), name: "Dome Check", recordPrefix: "DC", fields: [field.text(id("f:t"), "t", "T"), field.text(id("f:u"), "u", "U")] }] });
    const blocked = await waitFor("dome_check to become not exportable", async () => {
      const res = await org.get(csvPath("dome_check"));
      if (res.status === 503) return res;
      await res.arrayBuffer();
      return undefined;
    });
    const body = await problem(blocked, 503);
    expect(body.errorCode).toBe("DATASET_NOT_EXPORTABLE");
    expect(body.detail).toContain("dome_check");
    expect(body.detail).not.toMatch(/Mars|Olympus|not recognized|time zone/);

    await org.apply({ sites: [site(id("site"), "Olympus Base", "Europe/Paris")] });
    await waitFor("dome_check to export again", async () => (await org.get(csvPath("dome_check"))).status === 200);
    expect((await org.page("dome_check")).rows).toHaveLength(1);
  }, 120_000);

  describe("protocol details over the real stack", () => {
    it("401 carries WWW-Authenticate: Bearer", async () => {
      const res = await fetch(`${e2e.baseUrl}/v1/datasets`);
      await problem(res, 401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm="dataset-export"$/);
      const wrong = await fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: "Bearer ak_nope" } });
      await problem(wrong, 401);
      expect(wrong.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
    });

    it("routes are case-sensitive: /V1/datasets/resources_suppliers/CSV is 404 NOT_FOUND", async () => {
      for (const path of ["/V1/datasets/resources_suppliers/CSV", "/v1/datasets/resources_suppliers/CSV", "/v1/Datasets"]) {
        expect((await problem(await e2e.get(path), 404)).errorCode).toBe("NOT_FOUND");
      }
    });

    it("no Host: 400 problem+json; headers not finished within the header timeout: 408 problem+json", async () => {
      const noHost = await exchange(e2e.baseUrl, "GET /v1/datasets HTTP/1.1\r\nConnection: close\r\n\r\n");
      expect(noHost.head).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(noHost.body)).toMatchObject({ status: 400, errorCode: "BAD_REQUEST", instance: "/v1/datasets" });
      const slow = await exchange(e2e.baseUrl, "GET /v1/datasets HTTP/1.1\r\nHost: x\r\n");
      expect(slow.head).toMatch(/^HTTP\/1\.1 408 /);
      expect(slow.head).toMatch(/content-type: application\/problem\+json/i);
      expect(JSON.parse(slow.body)).toMatchObject({ status: 408, errorCode: "REQUEST_TIMEOUT" });
    }, 60_000);

    it("a header section too large: 431 problem+json with the request's path as instance", async () => {
      const { head, body } = await exchange(e2e.baseUrl, `GET /v1/datasets/abc/csv HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
      expect(head).toMatch(/^HTTP\/1\.1 431 /);
      expect(JSON.parse(body)).toMatchObject({ status: 431, errorCode: "REQUEST_HEADER_FIELDS_TOO_LARGE", instance: "/v1/datasets/abc/csv" });
    });
  });
});
