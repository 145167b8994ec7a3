// The CLI's tables for people: a header row, columns padded to their widest cell.

export function formatTable(header: string[], rows: string[][]): string {
  const table = [header, ...rows]
  const widths = header.map((_, col) => Math.max(...table.map((row) => row[col]?.length ?? 0)))
  return table
    .map(
      (row) =>
        `${row
          .map((cell, col) => cell.padEnd(widths[col] ?? 0))
          .join('  ')
          .trimEnd()}\n`,
    )
    .join('')
}
