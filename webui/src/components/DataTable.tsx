// A virtualised, sortable table (TanStack Table + TanStack Virtual). Only the
// rows in view are in the DOM, so 5,000 live rows re-render cheaply.
import { useRef, useState } from 'react';
import {
  flexRender,
  getCoreRowModel,
  getSortedRowModel,
  useReactTable,
  type ColumnDef,
  type Row,
  type RowData,
  type SortingState,
} from '@tanstack/react-table';
import { useVirtualizer } from '@tanstack/react-virtual';

declare module '@tanstack/react-table' {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- must match the library's generic signature
  interface ColumnMeta<TData extends RowData, TValue> {
    /** Right-aligned numbers. */
    numeric?: boolean;
  }
}

export interface DataTableProps<T> {
  data: T[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- column value types differ per column
  columns: ColumnDef<T, any>[];
  getRowId: (row: T) => string;
  label: string;
  initialSorting?: SortingState;
  onRowClick?: (row: T) => void;
  /** Fixed row height in px; virtualisation needs it. */
  rowHeight?: number;
  /** Sorting done by the server (audit search): disable client-side sort. */
  manualSorting?: boolean;
  emptyText?: string;
}

export function DataTable<T>({
  data, columns, getRowId, label, initialSorting = [], onRowClick,
  rowHeight = 34, manualSorting = false, emptyText = 'No rows.',
}: DataTableProps<T>) {
  const [sorting, setSorting] = useState<SortingState>(initialSorting);
  // eslint-disable-next-line react-hooks/incompatible-library -- TanStack Table returns fresh functions by design
  const table = useReactTable({
    data,
    columns,
    getRowId,
    state: { sorting },
    onSortingChange: setSorting,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: manualSorting ? undefined : getSortedRowModel(),
    manualSorting,
    autoResetAll: false,
  });
  const rows = table.getRowModel().rows;
  const scrollRef = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => rowHeight,
    overscan: 12,
    // First paint before measuring (and jsdom, which has no layout) still shows a screenful.
    initialRect: { width: 1200, height: 700 },
  });
  const items = virtualizer.getVirtualItems();
  const padTop = items.length > 0 ? (items[0]?.start ?? 0) : 0;
  const padBottom = items.length > 0 ? virtualizer.getTotalSize() - (items[items.length - 1]?.end ?? 0) : 0;
  const colCount = table.getVisibleLeafColumns().length;

  const open = (row: Row<T>) => {
    onRowClick?.(row.original);
  };

  return (
    <div className="table-wrap virtual" ref={scrollRef} tabIndex={-1}>
      <table className="data" aria-label={label} aria-rowcount={rows.length + 1} style={{ tableLayout: 'fixed' }}>
        <colgroup>
          {table.getVisibleLeafColumns().map((c) => (
            <col key={c.id} style={{ width: c.getSize() }} />
          ))}
        </colgroup>
        <thead>
          {table.getHeaderGroups().map((hg) => (
            <tr key={hg.id} aria-rowindex={1}>
              {hg.headers.map((h) => {
                const sorted = h.column.getIsSorted();
                const meta = h.column.columnDef.meta;
                const content = h.isPlaceholder ? null : flexRender(h.column.columnDef.header, h.getContext());
                return (
                  <th
                    key={h.id}
                    className={meta?.numeric ? 'num' : undefined}
                    aria-sort={sorted === 'asc' ? 'ascending' : sorted === 'desc' ? 'descending' : undefined}
                    scope="col"
                  >
                    {h.column.getCanSort() && !manualSorting ? (
                      <button type="button" className="sort" onClick={h.column.getToggleSortingHandler()}>
                        {content}
                        <span aria-hidden="true">{sorted === 'asc' ? '▲' : sorted === 'desc' ? '▼' : '↕'}</span>
                      </button>
                    ) : (
                      content
                    )}
                  </th>
                );
              })}
            </tr>
          ))}
        </thead>
        <tbody>
          {padTop > 0 && (
            <tr aria-hidden="true">
              <td colSpan={colCount} style={{ height: padTop, padding: 0, border: 0 }} />
            </tr>
          )}
          {items.map((vi) => {
            const row = rows[vi.index];
            if (!row) return null;
            return (
              <tr
                key={row.id}
                aria-rowindex={vi.index + 2}
                className={onRowClick ? 'clickable' : undefined}
                style={{ height: rowHeight }}
                onClick={onRowClick ? () => { open(row); } : undefined}
                data-testid="row"
              >
                {row.getVisibleCells().map((cell) => {
                  const meta = cell.column.columnDef.meta;
                  return (
                    <td key={cell.id} className={meta?.numeric ? 'num' : undefined} style={{ overflow: 'hidden', textOverflow: 'ellipsis' }}>
                      {flexRender(cell.column.columnDef.cell, cell.getContext())}
                    </td>
                  );
                })}
              </tr>
            );
          })}
          {padBottom > 0 && (
            <tr aria-hidden="true">
              <td colSpan={colCount} style={{ height: padBottom, padding: 0, border: 0 }} />
            </tr>
          )}
          {rows.length === 0 && (
            <tr>
              <td colSpan={colCount} className="muted">{emptyText}</td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
