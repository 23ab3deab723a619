/** A TCP port that was free a moment ago (the OS picks it); one implementation, shared with `npm start`. */
export { freePort } from "../../scripts/lib/ports";
