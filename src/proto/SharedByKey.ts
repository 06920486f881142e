/**
 * A bounded table of values shared by a key that names their content: what many daemons declare alike (heartbeat
 * templates, kinds maps) is kept once per process instead of once per connection (issue 18). Bounded so that no
 * peer can make it larger: at `maxEntries` values, or `maxChars` UTF-16 units of keys, it starts over (values in
 * use stay with the connections that hold them).
 */
export interface SharedByKey<V> {
  /** The value shared under `key`, if any. */
  readonly get: (key: string) => V | undefined
  /** Shares `value` under `key` from now on; returns it. */
  readonly add: (key: string, value: V) => V
}

export const make = <V>(maxEntries: number, maxChars: number): SharedByKey<V> => {
  const table = new Map<string, V>()
  let chars = 0
  return {
    get: (key) => table.get(key),
    add: (key, value) => {
      if (table.size >= maxEntries || chars + key.length > maxChars) {
        table.clear()
        chars = 0
      }
      table.set(key, value)
      chars += key.length
      return value
    }
  }
}
