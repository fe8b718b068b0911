// The conversation the next prompt continues.

/**
 * The current conversation id and its generation. "New conversation" starts
 * a new generation; a turn remembers the generation it began in and may make
 * its conversation the current one only while that generation lasts, so that
 * a turn still streaming when the user starts over does not bring its
 * conversation back when it ends.
 */
export class Conversation {
  /** @param {(id: string|null) => void} onChange called with the id whenever it is set */
  constructor(onChange = () => {}) {
    this.id = null;
    this.generation = 0;
    this.onChange = onChange;
  }

  /** Sets the current conversation (null: the next prompt starts one). */
  set(id) {
    this.id = id || null;
    this.onChange(this.id);
  }

  /** Starts over: the next prompt starts a conversation. */
  startNew() {
    this.generation++;
    this.set(null);
  }

  /**
   * Makes id the current conversation, as reported by a turn that began in
   * generation; reports whether it did.
   */
  adopt(generation, id) {
    if (!id || generation !== this.generation) return false;
    if (id !== this.id) this.set(id);
    return true;
  }
}
