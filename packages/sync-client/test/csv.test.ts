import { Readable } from "node:stream";
import { StreamAbortedError } from "../src/api/errors";
import { readCsvPage, type Cell } from "../src/csv";

async function read(chunks: Array<string | Buffer>, opts: { failAfter?: boolean } = {}) {
  const body = new Readable({ read() {} });
  const page = readCsvPage(body, "GET test");
  for (const c of chunks) body.push(typeof c === "string" ? Buffer.from(c) : c);
  if (opts.failAfter) body.destroy(new Error("other side closed"));
  else body.push(null);
  const reader = await page;
  const rows: Cell[][] = [];
  for await (const r of reader.rows) rows.push(r);
  return { header: reader.header, rows };
}

describe("reading a CSV page", () => {
  it("strips the BOM, keeps empty strings apart from nulls, embedded quotes and newlines", async () => {
    const { header, rows } = await read(["\uFEFFid,note,n,_cursor\n", 'a,"",,c1\n', 'b,"say ""hi""\nline 2",3,c2\n']);
    expect(header).toEqual(["id", "note", "n", "_cursor"]);
    expect(rows).toEqual([
      ["a", "", null, "c1"],
      ["b", 'say "hi"\nline 2', "3", "c2"],
    ]);
  });

  it("tells null from the empty string next to quoted fields holding quotes, commas and newlines", async () => {
    const values: Cell[] = [null, "", 'a"b', "x,y", "line\nbreak", '""', "plain", '"', ",", " "];
    const encode = (v: Cell) => (v === null ? "" : v === "" || /[",\n\r]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
    const rows: Cell[][] = [];
    for (const a of values) for (const b of values) rows.push([a, b, null, "", a]);
    const text = "\uFEFFa,b,c,d,e\n" + rows.map((r) => r.map(encode).join(",") + "\n").join("");
    const parsed = await read([text.slice(0, 101), text.slice(101)]);
    expect(parsed.rows).toEqual(rows);
  });

  it("reads a header-only page and fields of hundreds of thousands of characters split across chunks", async () => {
    expect((await read(["\uFEFFid,_cursor\n"])).rows).toEqual([]);
    const big = "x".repeat(400_000);
    const text = Buffer.from(`\uFEFFid,ref,_cursor\na,"{""v"":""${big}""}",c\n`);
    const chunks = [];
    for (let i = 0; i < text.length; i += 16_384) chunks.push(text.subarray(i, i + 16_384));
    const { rows } = await read(chunks);
    expect(rows[0][1]).toHaveLength(400_000 + 8);
  });

  it("counts the rows it hands out and keeps the last, and stays ended once the body has", async () => {
    const body = Readable.from([Buffer.from("\uFEFFid,_cursor\na,c1\nb,c2\n"), Buffer.from("c,c3\n")]);
    const reader = await readCsvPage(body, "GET test");
    expect([reader.rowsRead(), reader.lastRow()]).toEqual([0, null]);
    const seen: Array<[number, Cell[] | null]> = [];
    for await (const row of reader.rows) seen.push([reader.rowsRead(), row]);
    expect(seen).toEqual([
      [1, ["a", "c1"]],
      [2, ["b", "c2"]],
      [3, ["c", "c3"]],
    ]);
    expect([reader.rowsRead(), reader.lastRow()]).toEqual([3, ["c", "c3"]]);
    const rows = reader.rows[Symbol.asyncIterator]();
    await expect(rows.next()).resolves.toEqual({ value: undefined, done: true });
    await expect(rows.next()).resolves.toEqual({ value: undefined, done: true });
  });

  it("a body that aborts, stops inside a quoted field or without a final LF is a StreamAbortedError", async () => {
    await expect(read(["\uFEFFid,_cursor\n", "a,c1\n"], { failAfter: true })).rejects.toBeInstanceOf(StreamAbortedError);
    await expect(read(["\uFEFFid,note,_cursor\n", 'a,"unterminated'])).rejects.toBeInstanceOf(StreamAbortedError);
    await expect(read(["\uFEFFid,_cursor\n", "a,c1"])).rejects.toBeInstanceOf(StreamAbortedError);
    await expect(read([])).rejects.toBeInstanceOf(StreamAbortedError);
    // After the failure the rows stay ended: a reader that goes on gets no more, and no second error.
    const body = new Readable({ read() {} });
    const page = readCsvPage(body, "GET test");
    body.push(Buffer.from("\uFEFFid,_cursor\na,c1"));
    body.push(null);
    const rows = (await page).rows[Symbol.asyncIterator]();
    await expect(rows.next()).rejects.toBeInstanceOf(StreamAbortedError);
    await expect(rows.next()).resolves.toEqual({ value: undefined, done: true });
  });
});

describe("splitting a page for a target that parses CSV itself", () => {
  async function split(chunks: string[], opts: { failAfter?: boolean } = {}) {
    const { splitCsvPage } = await import("../src/csv");
    const body = new Readable({ read() {} });
    const page = splitCsvPage(body, "GET test");
    for (const c of chunks) body.push(Buffer.from(c));
    if (opts.failAfter) body.destroy(new Error("other side closed"));
    else body.push(null);
    const p = await page;
    const parts: Buffer[] = [];
    let error: unknown;
    try {
      for await (const c of p.records) parts.push(c as Buffer);
    } catch (err) {
      error = err;
    }
    return { header: p.header, records: Buffer.concat(parts).toString(), check: () => p.assertCleanEnd(), error };
  }

  it("parses the header (BOM stripped, even split across chunks) and hands on the records untouched", async () => {
    const r = await split(["\uFEFFid,no", "te,_cursor\na,", '"x\ny",c1\n']);
    expect(r.header).toEqual(["id", "note", "_cursor"]);
    expect(r.records).toBe('a,"x\ny",c1\n');
    expect(() => r.check()).not.toThrow();
  });

  it("an aborted body or one without a final LF fails assertCleanEnd", async () => {
    const aborted = await split(["\uFEFFid,_cursor\n", "a,c1\n"], { failAfter: true });
    expect(() => aborted.check()).toThrow(StreamAbortedError);
    const cut = await split(["\uFEFFid,_cursor\n", "a,c"]);
    expect(() => cut.check()).toThrow(StreamAbortedError);
  });
});

describe("replacing each record's cursor for an appended page", () => {
  async function replaced(text: string, chunkSizes: number[] | "bytes") {
    const { CursorFieldReplaced } = await import("../src/csv");
    const bytes = Buffer.from(text);
    const chunks: Buffer[] = [];
    if (chunkSizes === "bytes") for (let i = 0; i < bytes.length; i++) chunks.push(bytes.subarray(i, i + 1));
    else for (let i = 0, k = 0; i < bytes.length; i += chunkSizes[k++ % chunkSizes.length]) chunks.push(bytes.subarray(i, i + chunkSizes[k % chunkSizes.length]));
    const stream = new CursorFieldReplaced("7");
    const out: Buffer[] = [];
    stream.on("data", (c: Buffer) => out.push(c));
    const done = new Promise<void>((resolve, reject) => {
      stream.on("end", resolve);
      stream.on("error", reject);
    });
    for (const c of chunks) stream.write(c);
    stream.end();
    await done;
    return { text: Buffer.concat(out).toString(), rows: stream.rows, lastCursor: stream.lastCursor };
  }

  const records = 'a,"x, ""y""\nz",c1+/=\nb,,c2\nc,"",c3\n';
  const expected = 'a,"x, ""y""\nz",7\nb,,7\nc,"",7\n';

  it("replaces the last field of every record, quoted commas, quotes and newlines kept, however the chunks fall", async () => {
    for (const sizes of [[records.length], [1], [2, 3], [5, 7, 11], [13]] as number[][]) {
      expect(await replaced(records, sizes)).toEqual({ text: expected, rows: 3, lastCursor: "c3" });
    }
    expect(await replaced(records, "bytes")).toEqual({ text: expected, rows: 3, lastCursor: "c3" });
    expect(await replaced("", [1])).toEqual({ text: "", rows: 0, lastCursor: null });
  });

  it("keeps a field of hundreds of thousands of characters split across chunks", async () => {
    const big = "x".repeat(300_000);
    const r = await replaced(`a,"${big}",cursor-1\n`, [16_384]);
    expect(r).toEqual({ text: `a,"${big}",7\n`, rows: 1, lastCursor: "cursor-1" });
  });

  it("fails on a quoted or empty last field and on a record cut short", async () => {
    const { CursorFieldError } = await import("../src/csv");
    await expect(replaced('a,"c,1"\n', [3])).rejects.toBeInstanceOf(CursorFieldError);
    await expect(replaced("a,\n", [3])).rejects.toBeInstanceOf(CursorFieldError);
    await expect(replaced("a\n", [3])).rejects.toBeInstanceOf(CursorFieldError);
    await expect(replaced("a,c1\nb,c", [3])).rejects.toThrow("record terminator");
  });
});

describe("counting a page's records ahead of a reader that parses them (recordsCounted)", () => {
  async function counted(text: string, chunkSize: number) {
    const { Readable } = await import("node:stream");
    const { recordsCounted } = await import("../src/csv");
    const bytes = Buffer.from(text);
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += chunkSize) chunks.push(bytes.subarray(i, i + chunkSize));
    const ends: Array<{ rows: number; lastCursor: string | null }> = [];
    const out: Buffer[] = [];
    for await (const c of recordsCounted(Readable.from(chunks), (page) => ends.push(page))) out.push(c as Buffer);
    return { text: Buffer.concat(out).toString(), ends };
  }

  const page = 'id,note,_cursor\na,"x, ""y""\nz",c1+/=\nb,,c2\nc,"",c3\n';

  it("passes the body byte for byte and reports every record (the header row included) and the last cursor once it ends", async () => {
    for (const size of [1, 2, 5, 13, page.length]) {
      expect(await counted(page, size)).toEqual({ text: page, ends: [{ rows: 4, lastCursor: "c3" }] });
    }
  });

  it("a last field that is no cursor stops the counting, not the body", async () => {
    const quoted = 'id,_cursor\na,"c,1"\nb,c2\n';
    expect(await counted(quoted, 3)).toEqual({ text: quoted, ends: [] });
    const noComma = "id\na\nb\n";
    expect(await counted(noComma, 2)).toEqual({ text: noComma, ends: [] });
  });

  it("a body cut short reaches the reader as an error and is never reported", async () => {
    const ends: unknown[] = [];
    await expect(counted("id,_cursor\na,c1\nb,c", 4).then((r) => ends.push(...r.ends))).rejects.toThrow("record terminator");
    expect(ends).toEqual([]);
  });
});
