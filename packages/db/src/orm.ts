import { MikroORM } from "@mikro-orm/postgresql";
import { entities } from "./entities";

/** MikroORM over the service tables. The schema itself comes from migrations/ (see migrate.ts). */
export function createOrm(connectionString: string, poolMax = 5): Promise<MikroORM> {
  return MikroORM.init({
    clientUrl: connectionString,
    entities,
    discovery: { warnWhenNoEntities: false },
    pool: { min: 0, max: poolMax },
    debug: false,
    allowGlobalContext: false,
    timezone: "+00:00",
  });
}
export type { MikroORM } from "@mikro-orm/postgresql";
