import { to as copyTo } from "pg-copy-streams";
import { createPool } from "../src/pool";
import { CopyTextUnescaper } from "../src/copy-stream";

const values = ["plain", "back\\slash\\\\", "tab\there", "line\nbreak\r\nend", "\b\f\v bells", "ends with a backslash\\", '"quoted", comma', "ünïcödé ✓ \\n literal", ""];

describe("CopyTextUnescaper", () => {
  it("gives back exactly what one text column held, however the output is cut into chunks", async () => {
    const pool = createPool({ connectionString: process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres", max: 1 });
    try {
      const client = await pool.connect();
      let output: Buffer;
      try {
        const stream = client.query(copyTo("COPY (SELECT v FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i) TO STDOUT (FORMAT text)".replace("$1::text[]", `ARRAY[${values.map((v) => `'${v.replace(/'/g, "''")}'`).join(", ")}]::text[]`)));
        const chunks: Buffer[] = [];
        for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
        output = Buffer.concat(chunks);
      } finally {
        client.release();
      }
      const expected = Buffer.from(values.map((v) => `${v}\n`).join(""), "utf8");
      // PostgreSQL escaped something (the test is not vacuous), and one pass undoes it.
      expect(output.equals(expected)).toBe(false);
      const whole = new CopyTextUnescaper();
      expect(whole.push(output).equals(expected)).toBe(true);
      for (let cut = 0; cut <= output.length; cut++) {
        const u = new CopyTextUnescaper();
        const joined = Buffer.concat([u.push(output.subarray(0, cut)), u.push(output.subarray(cut))]);
        u.end();
        expect({ cut, ok: joined.equals(expected) }).toEqual({ cut, ok: true });
      }
    } finally {
      await pool.end();
    }
  });

  it("passes a chunk without backslashes through untouched, and refuses output cut inside an escape", () => {
    const u = new CopyTextUnescaper();
    const chunk = Buffer.from("a,b,c\n");
    expect(u.push(chunk)).toBe(chunk);
    u.push(Buffer.from("x\\"));
    expect(() => u.end()).toThrow(/inside an escape/);
  });
});
