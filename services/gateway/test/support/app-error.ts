import { isAppError, type AppError } from "@exportsvc/common";

/** The AppError a promise rejects with; anything else (a success, another error) fails the test. */
export async function appErrorOf(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    if (isAppError(err)) return err;
    throw err;
  }
  throw new Error("expected a rejection");
}
