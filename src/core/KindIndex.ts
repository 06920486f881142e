/**
 * The gateway's index of current connections by the Harness kinds their latest declaration advertises (issue
 * 18: a Turn of a Session without a bound device looked at every connected device). Device selection walks
 * only the connections advertising the Session's kind, and stops at the first one that admits the Turn; the
 * other connections are summarized by two counts (with a declaration, without one), which is all the
 * refusal needs (CapabilityPolicy `selectDevice`).
 *
 * Mutable and synchronous: the gateway updates it where its registry changes (a valid heartbeat, a replaced
 * or ended connection). Every operation is O(kinds of one declaration); a walk is a live view of one kind's
 * set in the order connections began advertising it (entries removed meanwhile are skipped).
 */
export interface KindIndex<E> {
  /** Records `entry`'s latest declaration (the kinds it advertises); a registered entry only. */
  readonly declare: (entry: E, kinds: Iterable<string>) => void
  /** Forgets `entry` (replaced or ended connection). Idempotent. */
  readonly remove: (entry: E) => void
  /** The entries whose latest declaration advertises `kind`. */
  readonly advertising: (kind: string) => Iterable<E>
  /** How many indexed entries have a declaration (advertising any kinds, or none). */
  readonly declared: () => number
}

export const make = <E>(): KindIndex<E> => {
  const byKind = new Map<string, Set<E>>()
  const kindsOf = new Map<E, ReadonlyArray<string>>()
  const remove = (entry: E) => {
    const kinds = kindsOf.get(entry)
    if (kinds === undefined) return
    kindsOf.delete(entry)
    for (const kind of kinds) {
      const set = byKind.get(kind)
      if (set === undefined) continue
      set.delete(entry)
      if (set.size === 0) byKind.delete(kind)
    }
  }
  const declare = (entry: E, kinds: Iterable<string>) => {
    const next = [...new Set(kinds)]
    const previous = kindsOf.get(entry)
    if (previous !== undefined && previous.length === next.length && previous.every((k) => next.includes(k))) return
    remove(entry)
    kindsOf.set(entry, next)
    for (const kind of next) {
      let set = byKind.get(kind)
      if (set === undefined) byKind.set(kind, (set = new Set()))
      set.add(entry)
    }
  }
  const empty: ReadonlyArray<E> = []
  return {
    declare,
    remove,
    advertising: (kind) => byKind.get(kind) ?? empty,
    declared: () => kindsOf.size
  }
}
