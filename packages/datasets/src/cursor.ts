import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/**
 * The `_cursor` codec (see docs/cursor.md).
 *
 * Layout of version 2 (46 bytes, standard base64 with padding, 64 characters; version 1 had the same
 * layout but a MAC key that did not bind the organization):
 *   [0]      version
 *   [1]      id of the keyring entry that signed it
 *   [2..10)  last_modified: microseconds since 2000-01-01 00:00:00 UTC, int64 big-endian
 *            (PostgreSQL's own binary form, `timestamptz_send`, so the database writes it for free)
 *   [10..26) id (uuid, binary; `uuid_send`)
 *   [26..30) row_index, int32 big-endian (0 on datasets without row_index; `int4send`)
 *   [30..46) tag = SHA-256(datasetMacKey || bytes[0..30))[0..16)
 * datasetMacKey = HMAC-SHA256(secret, "exportsvc/cursor/v<version>" 0x00 organization id 0x00 dataset
 * key 0x00 row shape)[0..16) (row shape: rowShape() in registry.ts; cursors issued before it existed
 * carry the column fingerprint there, see services/export/src/cursor-check.ts): the organization, the dataset and its row shape are bound through
 * the key of the MAC, not the payload (dataset keys repeat across organizations, so the key alone would
 * let one organization's cursor page another's dataset of the same key and shape). The MAC input is fixed-length (46 bytes, one SHA-256 block) and the output truncated, so
 * this secret-prefix construction admits no length extension; it costs one SHA-256 compression per
 * row inside PostgreSQL instead of HMAC's four (measured in docs/cursor.md).
 */

/** 2: the organization entered the MAC key (version 1 cursors are refused as retired). */
export const CURRENT_CURSOR_VERSION = 2;
const PAYLOAD_BYTES = 30;
const TAG_BYTES = 16;
const CURSOR_BYTES = PAYLOAD_BYTES + TAG_BYTES;
const MAC_KEY_BYTES = 16;
/** Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 UTC). */
export const PG_EPOCH_OFFSET_MICROS = 946_684_800_000_000n;

export interface CursorKey {
  id: number;
  secret: Buffer;
}

/** Rotatable signing keys: the first entry signs, every entry verifies. */
export class CursorKeyring {
  private readonly byId: Map<number, CursorKey>;

  constructor(readonly keys: readonly CursorKey[]) {
    if (keys.length === 0) throw new Error("the cursor keyring needs at least one key");
    this.byId = new Map();
    for (const key of keys) {
      if (!Number.isInteger(key.id) || key.id < 0 || key.id > 255) throw new Error(`cursor key id ${key.id} is not an integer 0-255`);
      if (this.byId.has(key.id)) throw new Error(`cursor key id ${key.id} appears twice`);
      this.byId.set(key.id, key);
    }
  }

  /** Parses `CURSOR_KEYS`: comma-separated `<id>:<secret>` entries (secret: at least 16 characters, used as UTF-8 bytes). */
  static parse(spec: string): CursorKeyring {
    const entries = spec
      .split(",")
      .map((e) => e.trim())
      .filter((e) => e !== "");
    return new CursorKeyring(
      entries.map((entry) => {
        const colon = entry.indexOf(":");
        const idText = colon < 0 ? "" : entry.slice(0, colon);
        const secret = colon < 0 ? "" : entry.slice(colon + 1);
        if (!/^\d{1,3}$/.test(idText)) throw new Error("each entry must be '<id>:<secret>' with an integer id 0-255");
        if (secret.length < 16) throw new Error(`the secret of cursor key ${idText} must have at least 16 characters`);
        return { id: Number(idText), secret: Buffer.from(secret, "utf8") };
      }),
    );
  }

  get signing(): CursorKey {
    return this.keys[0];
  }

  get(id: number): CursorKey | undefined {
    return this.byId.get(id);
  }
}

/** What a cursor is bound to: it verifies only for this organization's dataset in this row shape. */
export interface CursorBinding {
  /** Canonical uuid text; compared case-insensitively. */
  organizationId: string;
  datasetKey: string;
  /** rowShape() of the dataset (or, for cursors issued before row shapes, its column fingerprint then). */
  rowShape: string;
}

/** A paging position: strictly after this row. */
export interface CursorPosition {
  /** Microseconds since the Unix epoch (UTC). */
  lastModifiedMicros: bigint;
  id: string;
  /** 0 on datasets without row_index. */
  rowIndex: number;
}

export type CursorProblem =
  | "empty"
  | "not_a_cursor"
  | "truncated"
  | "altered"
  | "retired_version"
  | "unknown_signing_key"
  | "other_dataset"
  /** A CSV cursor sent to the deletion feed, or a deletions cursor to the CSV endpoint. */
  | "other_feed"
  | "reshaped_dataset";

/** A cursor whose structure is sound; its MAC is not checked yet. */
export interface ParsedCursor {
  version: number;
  keyId: number;
  payload: Buffer;
  tag: Buffer;
  position: CursorPosition;
}

export type ParseResult = { ok: true; cursor: ParsedCursor } | { ok: false; problem: CursorProblem };

/** The per-(organization, dataset, shape) MAC key: what a cursor is bound to enters the MAC through its key. */
export function datasetMacKey(secret: Buffer, version: number, binding: CursorBinding): Buffer {
  return createHmac("sha256", secret)
    .update(`exportsvc/cursor/v${version}`, "utf8")
    .update(Buffer.from([0]))
    .update(binding.organizationId.toLowerCase(), "utf8")
    .update(Buffer.from([0]))
    .update(binding.datasetKey, "utf8")
    .update(Buffer.from([0]))
    .update(binding.rowShape, "utf8")
    .digest()
    .subarray(0, MAC_KEY_BYTES);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface CursorCodecOptions {
  keyring: CursorKeyring;
  /** The version new cursors get; older versions are refused as retired. */
  version?: number;
}

export class CursorCodec {
  readonly keyring: CursorKeyring;
  readonly version: number;

  constructor(opts: CursorCodecOptions) {
    this.keyring = opts.keyring;
    this.version = opts.version ?? CURRENT_CURSOR_VERSION;
    if (!Number.isInteger(this.version) || this.version < 1 || this.version > 255) throw new Error("cursor version must be 1-255");
  }

  /** Signs a position in TypeScript (the export itself signs inside PostgreSQL; see cursorSqlExpression). */
  encode(position: CursorPosition, binding: CursorBinding): string {
    const key = this.keyring.signing;
    const payload = Buffer.alloc(PAYLOAD_BYTES);
    payload[0] = this.version;
    payload[1] = key.id;
    payload.writeBigInt64BE(position.lastModifiedMicros - PG_EPOCH_OFFSET_MICROS, 2);
    Buffer.from(position.id.replace(/-/g, ""), "hex").copy(payload, 10);
    payload.writeInt32BE(position.rowIndex, 26);
    return Buffer.concat([payload, macTag(datasetMacKey(key.secret, this.version, binding), payload)]).toString("base64");
  }

  /** Checks the structure; says which problem a malformed cursor has. */
  parse(text: string): ParseResult {
    if (text.length === 0) return { ok: false, problem: "empty" };
    if (!BASE64.test(text)) return { ok: false, problem: "not_a_cursor" };
    const bytes = Buffer.from(text, "base64");
    const version = bytes.length > 0 ? bytes[0] : -1;
    const knownVersion = version >= 1 && version <= this.version;
    if (!knownVersion) return { ok: false, problem: "not_a_cursor" };
    if (version < this.version) return { ok: false, problem: "retired_version" };
    const canonicalLength = Math.ceil(CURSOR_BYTES / 3) * 4;
    if (bytes.length < CURSOR_BYTES || text.length < canonicalLength) return { ok: false, problem: "truncated" };
    if (bytes.length > CURSOR_BYTES || text.length > canonicalLength) return { ok: false, problem: "altered" };
    const keyId = bytes[1];
    if (!this.keyring.get(keyId)) return { ok: false, problem: "unknown_signing_key" };
    const payload = bytes.subarray(0, PAYLOAD_BYTES);
    const tag = bytes.subarray(PAYLOAD_BYTES);
    const rowIndex = payload.readInt32BE(26);
    if (rowIndex < 0) return { ok: false, problem: "altered" };
    const hex = payload.subarray(10, 26).toString("hex");
    return {
      ok: true,
      cursor: {
        version,
        keyId,
        payload,
        tag,
        position: {
          lastModifiedMicros: payload.readBigInt64BE(2) + PG_EPOCH_OFFSET_MICROS,
          id: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`,
          rowIndex,
        },
      },
    };
  }

  /** True when the cursor's MAC matches this (organization, dataset, shape) binding. Constant-time comparison. */
  verify(cursor: ParsedCursor, binding: CursorBinding): boolean {
    const key = this.keyring.get(cursor.keyId);
    if (!key) return false;
    return timingSafeEqual(macTag(datasetMacKey(key.secret, cursor.version, binding), cursor.payload), cursor.tag);
  }

  /**
   * What a table of stored cursors signed by `key` for `binding` records (form_ds.dataset_tables
   * .cursor_signature): the cursor version, the key's id and a fingerprint of the per-dataset MAC key
   * (a hash of it: the signature reveals nothing that signs). Equal signatures mean byte-identical
   * cursors, so a reader whose keyring derives the same signature may serve the stored ones.
   */
  storedSignature(binding: CursorBinding, key: CursorKey = this.keyring.signing): string {
    const fingerprint = createHash("sha256").update("exportsvc/stored-cursor-signature\u0000").update(datasetMacKey(key.secret, this.version, binding)).digest("hex");
    return `v${this.version}.k${key.id}.${fingerprint.slice(0, 32)}`;
  }

  /**
   * The key of this keyring that signed a table's stored cursors, when this keyring would sign them
   * byte-identically (same cursor version, the key still in the ring with the same secret, the same
   * binding); otherwise undefined, and the cursors must be computed instead.
   */
  keyForStoredSignature(signature: string | null | undefined, binding: CursorBinding): CursorKey | undefined {
    const match = signature ? /^v(\d{1,3})\.k(\d{1,3})\.[0-9a-f]{32}$/.exec(signature) : null;
    if (!match || Number(match[1]) !== this.version) return undefined;
    const key = this.keyring.get(Number(match[2]));
    return key && this.storedSignature(binding, key) === signature ? key : undefined;
  }

  /**
   * The SQL expression that computes a row's `_cursor` inside the export query, byte-identical to
   * encode() (or, given `key`, to what that key of the ring would sign). Only hex literals built here
   * and the given column expressions appear in it.
   */
  sqlExpression(binding: CursorBinding, columns: { lastModified: string; id: string; rowIndex?: string }, key: CursorKey = this.keyring.signing): string {
    const hex = (b: Buffer) => `'\\x${b.toString("hex")}'::bytea`;
    const header = Buffer.from([this.version, key.id]);
    const rowIndex = columns.rowIndex ? `int4send((${columns.rowIndex})::int4)` : hex(Buffer.alloc(4));
    const payload = `${hex(header)} || timestamptz_send(${columns.lastModified}) || uuid_send(${columns.id}) || ${rowIndex}`;
    // The payload appears twice: re-evaluating these cheap send functions costs less than a LATERAL
    // subquery per row. Only the derived per-dataset key appears in the statement, never the secret.
    const macKey = hex(datasetMacKey(key.secret, this.version, binding));
    return `encode(${payload} || substr(sha256(${macKey} || ${payload}), 1, ${TAG_BYTES}), 'base64')`;
  }
}

function macTag(macKey: Buffer, payload: Buffer): Buffer {
  return createHash("sha256").update(macKey).update(payload).digest().subarray(0, TAG_BYTES);
}
