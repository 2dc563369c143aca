/** limit/offset of a 1-based page; pageSize is held to 1..200 whatever the caller sends. */
export function pageWindow(req: { page: number; pageSize: number }): { limit: number; offset: number } {
  const pageSize = Math.min(Math.max(req.pageSize || 50, 1), 200);
  const page = Math.max(req.page || 1, 1);
  return { limit: pageSize, offset: (page - 1) * pageSize };
}
