import { notListedMessage } from "../src/dataset-keys";

describe("notListedMessage", () => {
  const listed = ["resources_suppliers", "resources_customers", "deviations", "hygiene_round__items"];

  it("names the nearest listed key for a typo (a letter missing, swapped or changed)", () => {
    expect(notListedMessage("resources_supplier", listed)).toBe("not in the listing (did you mean resources_suppliers?)");
    expect(notListedMessage("devaitions", listed)).toBe("not in the listing (did you mean deviations?)");
    expect(notListedMessage("hygiene_round_items", listed)).toBe("not in the listing (did you mean hygiene_round__items?)");
  });

  it("suggests nothing when no key is near", () => {
    expect(notListedMessage("temperature_check", listed)).toBe("not in the listing");
    expect(notListedMessage("x", [])).toBe("not in the listing");
  });
});
