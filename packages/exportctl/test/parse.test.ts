import { ATTRIBUTE_TYPES, demoDocument, ExportctlError, FIELD_TYPES, parseApplyDocument, readDocumentText, type FieldInput } from "@exportsvc/exportctl";

const ORG = "7B0C2F4E-1D3A-4C5B-8E6F-9A0B1C2D3E4F";

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ExportctlError);
    return (err as ExportctlError).problems.length > 0 ? (err as ExportctlError).problems : [(err as ExportctlError).message];
  }
  throw new Error("expected a rejection");
}

describe("reading and validating apply documents", () => {
  test("YAML and JSON give the same document; ids are lower-cased; product types are mapped", () => {
    const yaml = `organization: ${ORG}\nproducts:\n  - id: ${ORG}\n    productType: FinishedGood\nlots:\n  - id: ${ORG}\n    expiryDate: 2024-02-29\n`;
    const json = JSON.stringify({ organization: ORG, products: [{ id: ORG, productType: "FinishedGood" }], lots: [{ id: ORG, expiryDate: "2024-02-29" }] });
    const fromYaml = parseApplyDocument(readDocumentText(yaml, "doc.yaml"));
    const fromJson = parseApplyDocument(readDocumentText(json, "doc.json"));
    expect(fromYaml).toEqual(fromJson);
    expect(fromYaml.organization).toBe(ORG.toLowerCase());
    expect(fromYaml.products![0].productType).toBe(2);
    // YAML 1.2 core schema: an unquoted date stays a string.
    expect(fromYaml.lots![0].expiryDate).toBe("2024-02-29");
  });

  test("JSON is recognized by content when the name says nothing", () => {
    expect(readDocumentText(`  {"organization": "${ORG}"}`, "stdin")).toEqual({ organization: ORG });
  });

  test("syntax errors name the input", () => {
    expect(problemsOf(() => readDocumentText("{ nope", "bad.json"))[0]).toMatch(/bad\.json: not valid JSON/);
    expect(problemsOf(() => readDocumentText("a: [1, 2\nb: c", "bad.yaml")).join("\n")).toMatch(/./);
    expect(problemsOf(() => readDocumentText("a: 1\n---\nb: 2\n", "two.yaml"))[0]).toMatch(/exactly one YAML document, found 2/);
  });

  test("every problem is reported with its path", () => {
    const problems = problemsOf(() =>
      parseApplyDocument({
        organization: ORG,
        suppliers: [{ id: ORG, nmae: "typo" }],
        documents: [{ id: ORG, versions: [{ id: ORG, label: "1", current: true }, { id: ORG.replace("7B", "7C"), label: "2", current: true }] }],
        forms: [{ id: ORG, name: "F", recordPrefix: "F", fields: [{ id: ORG, key: "s", label: "S", type: "select" }, { id: ORG, key: "s", label: "S2", type: "text" }] }],
        deviations: [
          { id: ORG, submissionId: ORG, severity: "Low", status: "InProgress" },
          { id: ORG, submissionId: ORG, severity: "Low", status: "Resolved" },
          { id: ORG, submissionId: ORG, severity: "Low", status: "Open", signedAt: "2024-01-01T00:00:00Z" },
        ],
        sites: [{ id: ORG, name: "X", timeZone: "Mars/Olympus" }],
        delete: { widgets: [ORG] },
      }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        "suppliers[0]: unknown field(s) 'nmae'",
        "documents[0].versions: at most one version can be current",
        "forms[0].fields[0].options: is required for a select field",
        "forms[0].fields[1].key: duplicate field key 's' at this level",
        "forms[0].fields[1].id: duplicate field id 7b0c2f4e-1d3a-4c5b-8e6f-9a0b1c2d3e4f in this form",
        expect.stringMatching(/^deviations\[0\]\.linkedRecordId: is required when status is InProgress/),
        "deviations[1].resolutionType: is required when status is Resolved",
        "deviations[2].signedAt: a signature exists only on a deviation resolved by Comment",
        "sites[0].timeZone: must be an IANA time zone name (or empty)",
        "delete: unknown field(s) 'widgets'",
      ]),
    );
  });
});

describe("the demo document", () => {
  const doc = parseApplyDocument(demoDocument("0d3e6f6a-5c1b-4d7e-9a42-3f0c1e2d9b10"));
  const fieldTypes = (fields: FieldInput[]): string[] => fields.flatMap((f) => [f.type, ...fieldTypes(f.fields ?? [])]);

  test("covers every field type, with a grid inside a grid", () => {
    const used = new Set(doc.forms!.flatMap((f) => fieldTypes(f.fields)));
    expect([...FIELD_TYPES].filter((t) => !used.has(t))).toEqual([]);
    const nested = doc.forms!.some((f) => f.fields.some((g) => g.type === "grid" && (g.fields ?? []).some((c) => c.type === "grid")));
    expect(nested).toBe(true);
  });

  test("covers every attribute type on several kinds, and the awkward keys", () => {
    for (const kind of ["suppliers", "products"]) {
      const types = new Set(doc.customAttributes!.filter((a) => a.resourceKind === kind).map((a) => a.type));
      expect([...ATTRIBUTE_TYPES].filter((t) => !types.has(t))).toEqual([]);
    }
    const keys = doc.customAttributes!.map((a) => a.key);
    expect(keys).toContain("Row Index");
    expect(keys).toContain("name");
    expect(keys.some((k) => k.length === 70)).toBe(true);
  });

  test("has deviations in every state and both kinds of assignee", () => {
    const d = doc.deviations!;
    expect(new Set(d.map((x) => x.status))).toEqual(new Set(["Open", "InProgress", "Resolved"]));
    expect(d.some((x) => x.resolutionType === "Comment" && x.signedAt)).toBe(true);
    expect(d.some((x) => x.resolutionType === "Comment" && !x.signedAt)).toBe(true);
    expect(d.some((x) => x.resolutionType === "LinkedResolutionRecord")).toBe(true);
    expect(d.some((x) => x.assignedUserId && !x.assignedTeamId)).toBe(true);
    expect(d.some((x) => x.assignedTeamId && !x.assignedUserId)).toBe(true);
    expect(new Set(doc.sites!.map((s) => s.timeZone)).size).toBeGreaterThanOrEqual(2);
  });
});
