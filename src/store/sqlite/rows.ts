// What node:sqlite returns, read as this engine's rows. Its types say only that each column is
// one of SQLite's values; the columns are ours (migrations.ts), so a value of another type is a
// bug in this engine, refused here with the column named rather than cast through.
import type { SQLOutputValue } from 'node:sqlite'
import { PetStatus } from '../../contract/schemas.ts'

/** A row of pets as an array (preparePetQuery): id, name, category id, status. */
export type PetRow = [id: number, name: string, categoryId: number, status: PetStatus | null]

/** A row as node:sqlite gives it without `setReturnArrays`. */
export type RowObject = Record<string, SQLOutputValue>

function wrongShape(what: string, value: unknown): Error {
  return new TypeError(`SQLite returned ${typeof value} for ${what}; the schema says otherwise`)
}

/** The contract's statuses (a list of three: a look-up in it is cheaper than in a Set). */
const STATUSES: readonly unknown[] = PetStatus.enum

function isPetStatus(value: unknown): value is PetStatus {
  return STATUSES.includes(value)
}

/** Reads each column by index: a page checks up to 101 rows, so no destructuring, no copy. */
function checkPetRow(row: unknown): asserts row is PetRow {
  if (!Array.isArray(row) || row.length !== 4) throw wrongShape('a row of pets', row)
  const status: unknown = row[3]
  if (typeof row[0] !== 'number') throw wrongShape('pets.id', row[0])
  if (typeof row[1] !== 'string') throw wrongShape('pets.name', row[1])
  if (typeof row[2] !== 'number') throw wrongShape('pets.category_id', row[2])
  if (status !== null && !isPetStatus(status)) throw wrongShape('pets.status', status)
}

/** A row of pets read as an array (preparePetQuery), or undefined for none. */
export function petRowOrNone(row: unknown): PetRow | undefined {
  if (row === undefined) return undefined
  checkPetRow(row)
  return row
}

/** Rows of pets read as arrays, checked in place (no copy on a page's path). */
export function checkPetRows(rows: unknown[]): asserts rows is PetRow[] {
  for (const row of rows) checkPetRow(row)
}

/** A text column of a row object. */
export function text(row: RowObject, column: string): string {
  const value = row[column]
  if (typeof value !== 'string') throw wrongShape(column, value)
  return value
}

/** A text column that may be NULL. */
export function textOrNull(row: RowObject, column: string): string | null {
  const value = row[column]
  return value === null ? null : text(row, column)
}

/** An INTEGER column of a row object, as a number (the engine reads none past 2^53). */
export function integer(row: RowObject, column: string): number {
  const value = row[column]
  if (typeof value === 'bigint') return Number(value)
  if (typeof value !== 'number') throw wrongShape(column, value)
  return value
}
