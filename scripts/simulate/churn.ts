import type { Pool } from "pg";
import { inTransaction } from "@exportsvc/db";
import { RECORD_REFERENCES, RESOURCE_KINDS as STORED_RESOURCE_KINDS, RESOURCES, type ReferringSection, type ResourceSectionName } from "@exportsvc/datasets";
import { applyDocument, type ApplyDocumentInput } from "@exportsvc/exportctl";
import { Random } from "./random";

/**
 * The churn generator: a reproducible random mix of changes to one organization's source data,
 * written through `applyDocument` (the code path of `exportctl apply`), plus long transactions that
 * commit late, written with plain SQL on a connection of their own.
 *
 * The generator keeps a model of what it wrote, so that every document states a record completely
 * (the apply format's rule) and refers only to records that exist. All randomness is drawn while a
 * change is planned, before anything is written, so one seed gives one sequence of changes.
 */

type Rec = Record<string, any>;

interface Field {
  id: string;
  key: string;
  label: string;
  type: string;
  options?: { key: string; label: string }[];
  fields?: Field[];
}

interface FormModel {
  id: string;
  name: string;
  prefix: string;
  fields: Field[];
  deleted: boolean;
}

interface SubmissionModel {
  id: string;
  formId: string;
  siteId: string;
  stepId: string;
  status: "InProgress" | "Completed" | "Cancelled";
  archived: boolean;
  startedAt: string;
  completedAt: string | null;
  values: Record<string, unknown>;
}

interface DeviationModel {
  id: string;
  submissionId: string;
  stepId: string;
  severity: string;
  status: "Open" | "InProgress" | "Resolved";
  linkedRecordId?: string;
  resolutionType?: "Comment" | "LinkedResolutionRecord";
  resolutionComment?: string;
  resolvedAt?: string;
  comment?: string;
}

/** Resource sections of the apply document the generator writes, and how a record of each is made. */
const RESOURCE_KINDS: ResourceSectionName[] = STORED_RESOURCE_KINDS.map((kind) => RESOURCES[kind].section);
type ResourceKind = ReferringSection;

/** Reference properties of each section (the domain's): a deleted target is dropped from the record when it is stated again. */
const REFERENCES: Partial<Record<ResourceKind, Record<string, ResourceKind>>> = RECORD_REFERENCES;

const TIME_ZONES = ["UTC", "Europe/Berlin", "America/Chicago", "Asia/Tokyo", "Australia/Sydney", "America/Sao_Paulo"];

export type ChangeKind =
  | "submissionCreate" | "submissionEdit" | "gridRows" | "submissionComplete" | "submissionArchive" | "submissionDelete"
  | "resourceCreate" | "resourceEdit" | "resourceDelete" | "resourceRestore" | "relatedRename"
  | "deviationCreate" | "deviationAdvance"
  | "formAddField" | "formRemoveField" | "formRetypeField" | "formRelabel" | "formRename" | "formDelete"
  | "siteRename" | "siteTimeZone" | "batch" | "sharedTimestamp" | "longTransaction";

const WEIGHTS: Record<ChangeKind, number> = {
  submissionCreate: 14, submissionEdit: 14, gridRows: 10, submissionComplete: 5, submissionArchive: 2, submissionDelete: 3,
  resourceCreate: 8, resourceEdit: 14, resourceDelete: 3, resourceRestore: 1.5, relatedRename: 2,
  deviationCreate: 4, deviationAdvance: 5,
  formAddField: 0.8, formRemoveField: 0.5, formRetypeField: 0.5, formRelabel: 0.8, formRename: 0.3, formDelete: 0.2,
  siteRename: 1, siteTimeZone: 0.5, batch: 4, sharedTimestamp: 2, longTransaction: 1.5,
};

export interface PlannedChange {
  kind: ChangeKind;
  doc?: ApplyDocumentInput;
  /** A long transaction: SQL run inside BEGIN … (held open holdMs) … COMMIT. */
  sql?: { statements: [string, unknown[]][]; holdMs: number };
  applied(): void;
}

export interface ChurnCounters {
  changes: Record<string, number>;
  documents: number;
  longTransactions: number;
  /** Documents the loader refused (a model defect of the generator, never a fault). */
  refused: number;
  refusals: string[];
  /** Writes retried because the database was away (a fault). */
  writeRetries: number;
}

export class OrgChurn {
  readonly rnd: Random;
  private forms: FormModel[] = [];
  private subs = new Map<string, SubmissionModel>();
  private devs = new Map<string, DeviationModel>();
  private res = new Map<ResourceKind, Map<string, Rec>>();
  /** Deleted records, as last stated: a restore states one again under the same id. */
  private deletedRes = new Map<ResourceKind, Map<string, Rec>>();
  private counter = 0;
  readonly counters: ChurnCounters = { changes: {}, documents: 0, longTransactions: 0, refused: 0, refusals: [], writeRetries: 0 };

  constructor(readonly organizationId: string, seed: number, private readonly weights: Partial<Record<ChangeKind, number>> = {}) {
    this.rnd = Random.derived(seed, organizationId);
    for (const k of [...RESOURCE_KINDS, "sites", "teams"] as ResourceKind[]) {
      this.res.set(k, new Map());
      this.deletedRes.set(k, new Map());
    }
  }

  private n(): number {
    return ++this.counter;
  }
  private all(kind: ResourceKind): Rec[] {
    return [...this.res.get(kind)!.values()];
  }
  private ids(kind: ResourceKind): string[] {
    return [...this.res.get(kind)!.keys()];
  }
  private someIds(kind: ResourceKind, max: number): string[] {
    const ids = this.ids(kind);
    return this.rnd.shuffle(ids).slice(0, this.rnd.int(0, Math.min(max, ids.length)));
  }
  private maybeId(kind: ResourceKind): string | null {
    const ids = this.ids(kind);
    return ids.length && this.rnd.chance(0.85) ? this.rnd.pick(ids) : null;
  }

  // ---- records -------------------------------------------------------------------------------

  private newResource(kind: ResourceKind): Rec {
    const id = this.rnd.uuid();
    const name = `${this.rnd.word()} ${kind} ${this.n()}`;
    switch (kind) {
      case "sites": return { id, name, timeZone: this.rnd.pick(TIME_ZONES), parentId: this.maybeId("sites") };
      case "teams": return { id, name };
      case "suppliers": return { id, name, status: this.rnd.pick(["Approved", "Pending", "Suspended"]), city: this.rnd.word(), products: this.someIds("products", 3) };
      case "customers": return { id, name, contactFirstName: this.rnd.word(), contactLastName: this.rnd.chance(0.2) ? null : this.rnd.word(), products: this.someIds("products", 2) };
      case "products": return { id, name, productType: this.rnd.pick(["RawMaterial", "WorkInProgress", "FinishedGood", "Packaging"]), productCategoryId: this.maybeId("productCategories"), allergens: this.rnd.chance(0.3) ? ["gluten"] : [], sites: this.someIds("sites", 2) };
      case "productCategories": return { id, name, parentId: this.rnd.chance(0.3) ? this.maybeId("productCategories") : null };
      case "equipment": return { id, name, make: this.rnd.word(), siteId: this.maybeId("sites") };
      case "chemicals": return { id, name, grade: this.rnd.word(), sites: this.someIds("sites", 2) };
      case "employees": return { id, firstName: this.rnd.word(), lastName: `${this.n()}`, jobTitle: this.rnd.word(), teams: this.someIds("teams", 2), sites: this.someIds("sites", 2) };
      case "areas": return { id, name, type: this.rnd.word(), size: this.rnd.int(1, 500), siteId: this.maybeId("sites") };
      case "lots": return { id, code: `LOT-${this.n()}`, status: this.rnd.pick(["Open", "Closed"]), quantity: this.rnd.int(1, 1000), productId: this.maybeId("products"), siteId: this.maybeId("sites") };
      case "recipes": return { id, name, status: "Draft", outputQuantity: this.rnd.int(1, 50), outputProductId: this.maybeId("products") };
      case "documents": return { id, name, status: "Published", versions: [{ id: this.rnd.uuid(), label: "v1", current: true }], sites: this.someIds("sites", 2), teams: this.someIds("teams", 1) };
    }
  }

  private editResource(kind: ResourceKind, rec: Rec): Rec {
    const out = { ...rec };
    switch (kind) {
      case "lots": out.quantity = this.rnd.int(1, 1000); out.status = this.rnd.pick(["Open", "Closed", "Quarantined"]); break;
      case "employees": out.jobTitle = `${this.rnd.word()} ${this.n()}`; break;
      case "documents": out.versions = [{ id: this.rnd.uuid(), label: `v${this.n()}`, current: true }]; break;
      case "suppliers": out.city = `${this.rnd.word()} ${this.n()}`; out.products = this.someIds("products", 3); break;
      default: out.name = `${this.rnd.word()} ${kind} ${this.n()}`;
    }
    return out;
  }

  /** A record as stated in a document: references to deleted records dropped. */
  private stated(kind: ResourceKind, rec: Rec): Rec {
    const out = { ...rec };
    for (const [prop, target] of Object.entries(REFERENCES[kind] ?? {})) {
      const live = this.res.get(target)!;
      if (Array.isArray(out[prop])) out[prop] = (out[prop] as string[]).filter((x) => live.has(x));
      else if (out[prop] && !live.has(out[prop])) out[prop] = null;
    }
    return out;
  }

  private field(type: string, depth = 0): Field {
    const n = this.n();
    const f: Field = { id: this.rnd.uuid(), key: `${type}_${n}`, label: `${this.rnd.word()} ${type} ${n}`, type };
    if (type === "select" || type === "checkboxGroup") {
      f.options = ["a", "b", "c"].map((k) => ({ key: `${k}${n}`, label: `${this.rnd.word()} ${k}` }));
    }
    if (type === "grid") {
      f.fields = [this.field("number", depth + 1), this.field("text", depth + 1)];
      if (depth === 0) f.fields.push(this.field("grid", depth + 1));
    }
    return f;
  }

  private value(f: Field, depth = 0): unknown {
    if (this.rnd.chance(0.1)) return null;
    switch (f.type) {
      case "text": return `${this.rnd.word()} ${this.n()}`;
      case "number": return this.rnd.int(-50, 5000) / 10;
      case "yesNo": return this.rnd.chance(0.5);
      case "date": return `2025-0${this.rnd.int(1, 9)}-1${this.rnd.int(0, 9)}`;
      case "dateTime": return new Date(Date.UTC(2025, this.rnd.int(0, 11), this.rnd.int(1, 28), this.rnd.int(0, 23), this.rnd.int(0, 59))).toISOString();
      case "select": return this.rnd.pick(f.options!).key;
      case "checkboxGroup": return f.options!.filter(() => this.rnd.chance(0.5)).map((o) => o.key);
      case "grid": return Array.from({ length: this.rnd.int(depth === 0 ? 0 : 0, depth === 0 ? 4 : 3) }, () => this.gridRow(f, depth + 1));
      default: return null;
    }
  }

  private gridRow(grid: Field, depth: number): Record<string, unknown> {
    const row: Record<string, unknown> = {};
    for (const child of grid.fields ?? []) row[child.id] = this.value(child, depth);
    return row;
  }

  private newForm(): FormModel {
    const n = this.n();
    return {
      id: this.rnd.uuid(),
      name: `Sim ${this.rnd.word()} check ${n}`,
      prefix: `S${n}`,
      deleted: false,
      fields: [this.field("text"), this.field("number"), this.field("yesNo"), this.field("select"), this.field("checkboxGroup"), this.field("dateTime"), this.field("grid")],
    };
  }

  private formDoc(f: FormModel): Rec {
    return { id: f.id, name: f.name, recordPrefix: f.prefix, deleted: f.deleted, fields: f.fields };
  }

  /** A submission as stated: only values of the form's current fields, grids recursively. */
  private submissionDoc(s: SubmissionModel): Rec {
    const form = this.forms.find((f) => f.id === s.formId)!;
    const values: Record<string, unknown> = {};
    const keep = (fields: Field[], v: Record<string, unknown>): Record<string, unknown> => {
      const out: Record<string, unknown> = {};
      for (const f of fields) {
        if (!(f.id in v)) continue;
        const x = v[f.id];
        out[f.id] = f.type === "grid" && Array.isArray(x) ? x.map((row) => keep(f.fields ?? [], row as Record<string, unknown>)) : x;
      }
      return out;
    };
    Object.assign(values, keep(form.fields, s.values));
    return {
      id: s.id, formId: s.formId, siteId: this.res.get("sites")!.has(s.siteId) ? s.siteId : null, status: s.status, archived: s.archived,
      startedAt: s.startedAt, completedAt: s.completedAt, values,
      steps: [{ id: s.stepId, name: "Record", kind: "Recording", status: s.status === "Completed" ? "Completed" : "InProgress" }],
    };
  }

  private deviationDoc(d: DeviationModel): Rec {
    const linked = d.linkedRecordId && this.subs.has(d.linkedRecordId) ? d.linkedRecordId : undefined;
    let status = d.status;
    let resolutionType = d.resolutionType;
    if (!linked && (status === "InProgress" || resolutionType === "LinkedResolutionRecord")) {
      status = "Resolved";
      resolutionType = "Comment";
    }
    return {
      id: d.id, submissionId: d.submissionId, stepId: d.stepId, severity: d.severity, status, fieldKey: "number", displayValue: "99",
      ...(linked ? { linkedRecordId: linked } : {}),
      ...(status === "Resolved" ? { resolutionType, resolutionComment: d.resolutionComment ?? null, resolvedAt: d.resolvedAt } : {}),
      comment: d.comment ?? null,
    };
  }

  private liveSubmissions(): SubmissionModel[] {
    const liveForms = new Set(this.forms.filter((f) => !f.deleted).map((f) => f.id));
    return [...this.subs.values()].filter((s) => liveForms.has(s.formId));
  }

  private newSubmission(): SubmissionModel | undefined {
    const forms = this.forms.filter((f) => !f.deleted);
    if (forms.length === 0) return undefined;
    const form = this.rnd.pick(forms);
    const values: Record<string, unknown> = {};
    for (const f of form.fields) values[f.id] = this.value(f);
    return {
      id: this.rnd.uuid(), formId: form.id, siteId: this.rnd.pick(this.ids("sites")), stepId: this.rnd.uuid(), status: "InProgress",
      archived: false, startedAt: new Date(Date.UTC(2025, 0, 1) + this.rnd.int(0, 300) * 86_400_000).toISOString(), completedAt: null, values,
    };
  }

  // ---- plan ---------------------------------------------------------------------------------

  /** The first document: sites, teams, a few of every resource kind, two forms, some submissions. */
  initial(): PlannedChange {
    for (let i = 0; i < 3; i++) this.add("sites", this.newResource("sites"));
    for (let i = 0; i < 2; i++) this.add("teams", this.newResource("teams"));
    for (const kind of ["productCategories", "products", ...RESOURCE_KINDS] as ResourceKind[]) {
      for (let i = 0; i < 2; i++) this.add(kind, this.newResource(kind));
    }
    this.forms.push(this.newForm(), this.newForm());
    for (let i = 0; i < 6; i++) {
      const s = this.newSubmission()!;
      this.subs.set(s.id, s);
    }
    const doc: Rec = { organization: this.organizationId, forms: this.forms.map((f) => this.formDoc(f)), submissions: [...this.subs.values()].map((s) => this.submissionDoc(s)) };
    for (const kind of ["sites", "teams", ...RESOURCE_KINDS] as ResourceKind[]) doc[kind] = this.all(kind).map((r) => this.stated(kind, r));
    return { kind: "batch", doc: doc as ApplyDocumentInput, applied: () => undefined };
  }

  private add(kind: ResourceKind, rec: Rec): void {
    this.res.get(kind)!.set(rec.id, rec);
  }

  /** Plans the next change (all randomness drawn here); `applied()` commits it to the model once written. */
  next(): PlannedChange {
    const weights = { ...WEIGHTS, ...this.weights };
    for (let attempt = 0; attempt < 20; attempt++) {
      const kind = this.rnd.weighted(weights);
      const planned = this.plan(kind);
      if (planned) return planned;
    }
    return this.plan("resourceCreate")!;
  }

  private doc(parts: Rec): ApplyDocumentInput {
    return { organization: this.organizationId, ...parts } as ApplyDocumentInput;
  }

  private plan(kind: ChangeKind): PlannedChange | undefined {
    const subs = this.liveSubmissions();
    switch (kind) {
      case "submissionCreate": {
        const s = this.newSubmission();
        if (!s) return undefined;
        return { kind, doc: this.doc({ submissions: [this.submissionDoc(s)] }), applied: () => this.subs.set(s.id, s) };
      }
      case "submissionEdit":
      case "gridRows":
      case "submissionComplete":
      case "submissionArchive": {
        if (subs.length === 0) return undefined;
        const s = { ...this.rnd.pick(subs) };
        const form = this.forms.find((f) => f.id === s.formId)!;
        s.values = { ...s.values };
        if (kind === "submissionEdit") {
          const f = this.rnd.pick(form.fields);
          s.values[f.id] = this.value(f);
        } else if (kind === "gridRows") {
          const grid = form.fields.find((f) => f.type === "grid");
          if (!grid) return undefined;
          const rows = Array.isArray(s.values[grid.id]) ? (s.values[grid.id] as Rec[]).slice() : [];
          const op = this.rnd.pick(["add", "remove", "reorder", "nested"] as const);
          if (op === "add" || rows.length === 0) rows.splice(this.rnd.int(0, rows.length), 0, this.gridRow(grid, 1));
          else if (op === "remove") rows.splice(this.rnd.int(0, rows.length - 1), 1);
          else if (op === "reorder") rows.splice(0, rows.length, ...this.rnd.shuffle(rows));
          else {
            const nested = grid.fields?.find((f) => f.type === "grid");
            const i = this.rnd.int(0, rows.length - 1);
            if (nested) rows[i] = { ...rows[i], [nested.id]: this.value(nested, 1) };
          }
          s.values[grid.id] = rows;
        } else if (kind === "submissionComplete") {
          s.status = this.rnd.chance(0.85) ? "Completed" : "Cancelled";
          s.completedAt = new Date(Date.parse(s.startedAt) + this.rnd.int(1, 72) * 3_600_000).toISOString();
        } else {
          s.archived = !s.archived;
        }
        return { kind, doc: this.doc({ submissions: [this.submissionDoc(s)] }), applied: () => this.subs.set(s.id, s) };
      }
      case "submissionDelete": {
        if (subs.length < 4) return undefined;
        const s = this.rnd.pick(subs);
        return {
          kind,
          doc: this.doc({ delete: { submissions: [s.id] } }),
          applied: () => {
            this.subs.delete(s.id);
            for (const [id, d] of this.devs) if (d.submissionId === s.id) this.devs.delete(id);
          },
        };
      }
      case "resourceCreate": {
        const rk = this.rnd.pick(RESOURCE_KINDS);
        const rec = this.newResource(rk);
        return { kind, doc: this.doc({ [rk]: [this.stated(rk, rec)] }), applied: () => this.add(rk, rec) };
      }
      case "resourceEdit": {
        const rk = this.rnd.pick(RESOURCE_KINDS);
        if (this.res.get(rk)!.size === 0) return undefined;
        const rec = this.editResource(rk, this.rnd.pick(this.all(rk)));
        return { kind, doc: this.doc({ [rk]: [this.stated(rk, rec)] }), applied: () => this.add(rk, rec) };
      }
      case "resourceDelete": {
        const rk = this.rnd.pick(RESOURCE_KINDS);
        if (this.res.get(rk)!.size < 2) return undefined;
        const rec = this.rnd.pick(this.all(rk));
        return {
          kind,
          doc: this.doc({ delete: { [rk]: [rec.id] } }),
          applied: () => {
            this.res.get(rk)!.delete(rec.id);
            this.deletedRes.get(rk)!.set(rec.id, rec);
          },
        };
      }
      case "resourceRestore": {
        // A deleted record stated again under its id (an undo): rows that kept naming it (a lot its
        // product, a product its supplier) show its name again without moving their last_modified.
        const kinds = RESOURCE_KINDS.filter((k) => this.deletedRes.get(k)!.size > 0);
        if (kinds.length === 0) return undefined;
        const rk = this.rnd.pick(kinds);
        const rec = this.rnd.pick([...this.deletedRes.get(rk)!.values()]);
        return {
          kind,
          doc: this.doc({ [rk]: [this.stated(rk, rec)] }),
          applied: () => {
            this.deletedRes.get(rk)!.delete(rec.id);
            this.add(rk, rec);
          },
        };
      }
      case "relatedRename": {
        // A product renamed: lots and recipes show its name without moving their last_modified.
        const rk = this.rnd.pick(["products", "productCategories", "teams"] as ResourceKind[]);
        if (this.res.get(rk)!.size === 0) return undefined;
        const rec = { ...this.rnd.pick(this.all(rk)), name: `${this.rnd.word()} renamed ${this.n()}` };
        return { kind, doc: this.doc({ [rk]: [this.stated(rk, rec)] }), applied: () => this.add(rk, rec) };
      }
      case "siteRename":
      case "siteTimeZone": {
        const site = { ...this.rnd.pick(this.all("sites")) };
        if (kind === "siteRename") site.name = `${this.rnd.word()} site ${this.n()}`;
        else site.timeZone = this.rnd.pick(TIME_ZONES.filter((z) => z !== site.timeZone));
        return { kind, doc: this.doc({ sites: [this.stated("sites", site)] }), applied: () => this.add("sites", site) };
      }
      case "deviationCreate": {
        if (subs.length === 0) return undefined;
        const s = this.rnd.pick(subs);
        const d: DeviationModel = { id: this.rnd.uuid(), submissionId: s.id, stepId: s.stepId, severity: this.rnd.pick(["Low", "Medium", "High", "Critical"]), status: "Open" };
        return { kind, doc: this.doc({ deviations: [this.deviationDoc(d)] }), applied: () => this.devs.set(d.id, d) };
      }
      case "deviationAdvance": {
        const open = [...this.devs.values()];
        if (open.length === 0) return undefined;
        const d = { ...this.rnd.pick(open) };
        const step = this.rnd.int(0, 2);
        if (step === 0) d.comment = this.rnd.chance(0.3) ? undefined : `note ${this.n()}`; // standalone comment: keeps last_modified
        else if (d.status === "Open" && subs.length > 1) {
          d.status = "InProgress";
          d.linkedRecordId = this.rnd.pick(subs).id;
        } else if (d.status !== "Resolved") {
          d.status = "Resolved";
          d.resolutionType = d.linkedRecordId && this.rnd.chance(0.5) ? "LinkedResolutionRecord" : "Comment";
          d.resolutionComment = `resolved ${this.n()}`;
          d.resolvedAt = new Date(Date.UTC(2025, 5, 1) + this.rnd.int(0, 10_000) * 60_000).toISOString();
        } else {
          d.resolutionComment = `edited ${this.n()}`;
        }
        return { kind, doc: this.doc({ deviations: [this.deviationDoc(d)] }), applied: () => this.devs.set(d.id, d) };
      }
      case "formAddField":
      case "formRemoveField":
      case "formRetypeField":
      case "formRelabel":
      case "formRename": {
        const forms = this.forms.filter((f) => !f.deleted);
        if (forms.length === 0) return undefined;
        const form: FormModel = { ...this.rnd.pick(forms) };
        form.fields = form.fields.map((f) => ({ ...f }));
        let dropValuesOf: string | undefined;
        if (kind === "formAddField") form.fields.push(this.field(this.rnd.pick(["text", "number", "select", "date"])));
        else if (kind === "formRemoveField") {
          const removable = form.fields.filter((f) => f.type !== "grid");
          if (removable.length < 3) return undefined;
          const gone = this.rnd.pick(removable);
          form.fields = form.fields.filter((f) => f !== gone);
          dropValuesOf = gone.id;
        } else if (kind === "formRetypeField") {
          const f = form.fields.find((x) => x.type === "number" || x.type === "text");
          if (!f) return undefined;
          f.type = f.type === "number" ? "text" : "number";
          dropValuesOf = f.id;
        } else if (kind === "formRelabel") {
          const f = this.rnd.pick(form.fields);
          f.label = `${this.rnd.word()} relabelled ${this.n()}`;
          if (f.options) f.options = f.options.map((o, i) => (i === 0 ? { ...o, label: `${this.rnd.word()} option ${this.n()}` } : o));
        } else form.name = `Sim ${this.rnd.word()} renamed ${this.n()}`;
        return {
          kind,
          doc: this.doc({ forms: [this.formDoc(form)] }),
          applied: () => {
            this.forms = this.forms.map((f) => (f.id === form.id ? form : f));
            if (dropValuesOf) for (const s of this.subs.values()) if (s.formId === form.id) delete s.values[dropValuesOf];
          },
        };
      }
      case "formDelete": {
        const forms = this.forms.filter((f) => !f.deleted);
        if (forms.length < 2) return undefined;
        const form = { ...this.rnd.pick(forms), deleted: true };
        const replacement = this.newForm();
        return {
          kind,
          doc: this.doc({ forms: [this.formDoc(form), this.formDoc(replacement)] }),
          applied: () => {
            this.forms = [...this.forms.map((f) => (f.id === form.id ? form : f)), replacement];
          },
        };
      }
      case "batch": {
        // Many changes in one transaction.
        const created = Array.from({ length: this.rnd.int(2, 6) }, () => this.newSubmission()).filter((s): s is SubmissionModel => !!s);
        const edited = this.rnd.shuffle(subs).slice(0, this.rnd.int(1, 4)).map((s) => {
          const form = this.forms.find((f) => f.id === s.formId)!;
          const copy = { ...s, values: { ...s.values } };
          const f = this.rnd.pick(form.fields);
          copy.values[f.id] = this.value(f);
          return copy;
        });
        const rk = this.rnd.pick(RESOURCE_KINDS);
        const resources = this.rnd.shuffle(this.all(rk)).slice(0, 3).map((r) => this.editResource(rk, r));
        return {
          kind,
          doc: this.doc({ submissions: [...created, ...edited].map((s) => this.submissionDoc(s)), [rk]: resources.map((r) => this.stated(rk, r)) }),
          applied: () => {
            for (const s of [...created, ...edited]) this.subs.set(s.id, s);
            for (const r of resources) this.add(rk, r);
          },
        };
      }
      case "sharedTimestamp": {
        // Many rows sharing one last_modified. Stamped slightly in the future: a stamp earlier than
        // the writing transaction's start is a backfill, outside the no-miss guarantee (docs/export.md).
        const stamp = new Date(Date.now() + 2000).toISOString();
        const picked = this.rnd.shuffle(subs).slice(0, this.rnd.int(2, 5)).map((s) => ({ ...s, archived: !s.archived }));
        const rk = this.rnd.pick(["suppliers", "lots", "products"] as const);
        const resources = this.rnd.shuffle(this.all(rk)).slice(0, 3).map((r) => this.editResource(rk, r));
        if (picked.length + resources.length < 2) return undefined;
        return {
          kind,
          doc: this.doc({
            submissions: picked.map((s) => ({ ...this.submissionDoc(s), lastModified: stamp })),
            [rk]: resources.map((r) => ({ ...this.stated(rk, r), lastModified: stamp })),
          }),
          applied: () => {
            for (const s of picked) this.subs.set(s.id, s);
            for (const r of resources) this.add(rk, r);
          },
        };
      }
      case "longTransaction": {
        // A transaction that stamps rows early and commits seconds later (the visibility horizon's case).
        const suppliers = this.all("suppliers");
        if (suppliers.length === 0 || subs.length === 0) return undefined;
        const sup = this.rnd.pick(suppliers);
        const s = this.rnd.pick(subs);
        const description = `long ${this.n()}`;
        const holdMs = this.rnd.int(1000, 6000);
        return {
          kind,
          sql: {
            holdMs,
            statements: [
              ["UPDATE suppliers SET description = $3, last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $2", [this.organizationId, sup.id, description]],
              ["UPDATE submissions SET is_archived = NOT is_archived, last_modified = clock_timestamp() WHERE organization_id = $1 AND id = $2", [this.organizationId, s.id]],
            ],
          },
          applied: () => {
            this.add("suppliers", { ...sup, description });
            const cur = this.subs.get(s.id);
            if (cur) this.subs.set(s.id, { ...cur, archived: !cur.archived });
          },
        };
      }
    }
  }
}

/** Errors that mean "the database is away" (a fault): the same write is tried again. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (
    ["ECONNREFUSED", "ECONNRESET", "EPIPE", "57P01", "57P02", "57P03", "08006", "08001", "08003", "53300"].includes(e?.code ?? "") ||
    /Connection terminated|connection.*(closed|ended|terminated)|timeout exceeded when trying to connect|the database system is (starting up|shutting down)|Client has encountered a connection error/i.test(e?.message ?? "")
  );
}

export interface ChurnRunOptions {
  pool: Pool;
  ratePerSecond: number;
  shouldStop: () => boolean;
  log: (line: string) => void;
}

/** Writes the planned change, trying again while the database is away. Returns false when the loader refused it. */
export async function writeChange(churn: OrgChurn, change: PlannedChange, opts: ChurnRunOptions): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      if (change.doc) {
        await applyDocument(opts.pool, change.doc);
        churn.counters.documents++;
      } else if (change.sql) {
        const { statements, holdMs } = change.sql;
        await inTransaction(opts.pool, async (client) => {
          for (const [sql, params] of statements) await client.query(sql, params);
          await new Promise((r) => setTimeout(r, holdMs));
        });
        churn.counters.longTransactions++;
      }
      change.applied();
      churn.counters.changes[change.kind] = (churn.counters.changes[change.kind] ?? 0) + 1;
      return true;
    } catch (err) {
      if (isConnectionError(err) && !(opts.shouldStop() && attempt > 50)) {
        churn.counters.writeRetries++;
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** Math.min(attempt, 5))));
        continue;
      }
      churn.counters.refused++;
      const e = err as { message?: string };
      const message = `${change.kind}: ${e.message ?? String(err)}`;
      if (churn.counters.refusals.length < 20) churn.counters.refusals.push(message);
      opts.log(`generator: change refused: ${message}`);
      return false;
    }
  }
}

/**
 * Runs one organization's churn until told to stop: changes arrive as a Poisson process of the
 * given rate; a long transaction runs beside the stream (it does not hold the next change back).
 */
export async function runChurn(churn: OrgChurn, opts: ChurnRunOptions): Promise<void> {
  const pending = new Set<Promise<unknown>>();
  while (!opts.shouldStop()) {
    const wait = churn.rnd.interval(opts.ratePerSecond);
    const change = churn.next();
    // Waited in slices: at a low rate (a small organization of a soak) one gap can be minutes, and
    // the run must end when it is told to, not after the longest organization's gap.
    for (const until = Date.now() + wait; Date.now() < until && !opts.shouldStop(); ) {
      await new Promise((r) => setTimeout(r, Math.min(1000, until - Date.now())));
    }
    if (opts.shouldStop()) break;
    if (change.sql) {
      const p = writeChange(churn, change, opts).finally(() => pending.delete(p));
      pending.add(p);
    } else {
      await writeChange(churn, change, opts);
    }
  }
  await Promise.all(pending);
}
