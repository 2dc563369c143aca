// Human-readable rendering of the services' JSON log lines for `npm start`.

const LEVELS = /** @type {Record<number, [string, number]>} */ ({
  10: ['TRACE', 90],
  20: ['DEBUG', 90],
  30: ['INFO ', 32],
  40: ['WARN ', 33],
  50: ['ERROR', 31],
  60: ['FATAL', 41],
});
const NAME_COLORS = [36, 35, 34, 33, 32, 96, 95, 94];
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'v']);

/**
 * Returns a printer writing `hh:mm:ss.mmm name │ LEVEL message key=value …` to stdout.
 * @param {{ names: string[], color?: boolean }} opts  names: every prefix, for alignment
 * @returns {(name: string, line: string) => void}
 */
export function createLogPrinter(opts) {
  const color = opts.color ?? (process.stdout.isTTY === true && !process.env.NO_COLOR);
  const width = Math.max(...opts.names.map((n) => n.length));
  /** @type {(code: number, s: string) => string} */
  const paint = (code, s) => (color ? `\x1b[${code}m${s}\x1b[0m` : s);
  /** @type {Map<string, number>} */
  const nameColor = new Map(opts.names.map((n, i) => [n, NAME_COLORS[i % NAME_COLORS.length] ?? 36]));

  return (name, line) => {
    const prefix = `${paint(nameColor.get(name) ?? 37, name.padEnd(width))} ${paint(90, '│')}`;
    const entry = parseJson(line);
    if (!entry) {
      process.stdout.write(`${paint(90, clock(Date.now()))} ${prefix} ${line}\n`);
      return;
    }
    const [label, levelColor] = LEVELS[Number(entry.level)] ?? ['     ', 37];
    // Access-log lines read as `POST /api/Members 201 12.5 ms traceId=…`.
    if (entry.component === 'access' && entry.route) {
      entry.msg = `${entry.method} ${entry.route} ${entry.status} ${entry.durationMs} ms`;
      for (const k of ['component', 'method', 'route', 'status', 'durationMs']) delete entry[k];
    }
    const fields = Object.entries(entry)
      .filter(([k]) => !HIDDEN.has(k) && k !== 'err')
      .map(([k, v]) => `${paint(90, `${k}=`)}${typeof v === 'string' ? v : JSON.stringify(v)}`);
    const time = typeof entry.time === 'number' ? entry.time : Date.now();
    let out = `${paint(90, clock(time))} ${prefix} ${paint(levelColor, label)} ${entry.msg ?? ''}${fields.length ? ` ${fields.join(' ')}` : ''}\n`;
    const err = /** @type {{ stack?: string, message?: string } | undefined} */ (entry.err);
    if (err) out += `${(err.stack ?? err.message ?? JSON.stringify(err)).replace(/^/gm, `${' '.repeat(width + 16)}`)}\n`;
    process.stdout.write(out);
  };
}

/**
 * @param {string} line
 * @returns {Record<string, unknown> | undefined}
 */
function parseJson(line) {
  if (!line.startsWith('{')) return undefined;
  try {
    const v = JSON.parse(line);
    return v && typeof v === 'object' ? v : undefined;
  } catch {
    return undefined;
  }
}

/** @param {number} ms */
function clock(ms) {
  return new Date(ms).toTimeString().slice(0, 8) + `.${String(ms % 1000).padStart(3, '0')}`;
}
