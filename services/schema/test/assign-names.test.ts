import { SchemaService } from "@exportsvc/proto";
import { createClient } from "@exportsvc/rpc";
import { hash8 } from "@exportsvc/naming";
import { startSchemaService } from "./support";

describe("AssignNames", () => {
  it("applies the naming rules over gRPC, keeping previous assignments", async () => {
    const service = await startSchemaService();
    const client = createClient(SchemaService, `127.0.0.1:${service.port}`);
    try {
      const long = "x".repeat(60);
      const res = await client.assignNames({
        candidates: [
          { sourceId: "f1", parts: ["Row Index"] },
          { sourceId: "f2", parts: ["Supplier"], suffix: "id" },
          { sourceId: "f3", parts: ["Temperature"], prefix: "verification" },
          { sourceId: "f4", parts: ["Checks", long] },
          { sourceId: "f5", parts: ["Colour"] },
          { sourceId: "f6", parts: ["colour"] },
        ],
        reserved: ["id", "row_index"],
        previous: [{ sourceId: "f6", name: "colour" }],
      });
      const full = `checks__${long}`;
      expect(res.assignments.map((a) => [a.sourceId, a.name])).toEqual([
        ["f1", "row_index_2"],
        ["f2", "supplier_id"],
        ["f3", "verification_temperature"],
        ["f4", `${full.slice(0, 54)}_${hash8(full)}`],
        ["f5", "colour_2"],
        ["f6", "colour"],
      ]);
      await expect(client.assignNames({ candidates: [{ sourceId: "x", parts: [] }] })).rejects.toMatchObject({ status: 400 });
    } finally {
      client.close();
      await service.stop();
    }
  });
});
