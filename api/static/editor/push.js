// The tab's push connection (Server-Sent Events). Every event it receives belongs to an execution
// this tab started; they are handed on as "push" events. The browser reconnects by itself when
// the stream ends; when it gives up (an error status) we open a new one after a pause.

const RETRY_MS = 2000;

export class Push extends EventTarget {
  constructor(url) {
    super();
    this.url = url;
    this.connected = false;
    this.opened = 0; // how many times a stream opened; > 1 means events may have been missed
    this._waiters = [];
  }

  connect() {
    const source = new EventSource(this.url);
    this.source = source;
    source.onopen = () => {
      this.connected = true;
      this.opened += 1;
      for (const resolve of this._waiters.splice(0)) resolve();
      this.dispatchEvent(new CustomEvent("open", { detail: { reconnected: this.opened > 1 } }));
    };
    source.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      this.dispatchEvent(new CustomEvent("push", { detail: event }));
    };
    source.onerror = () => {
      this.connected = false;
      this.dispatchEvent(new CustomEvent("down"));
      if (source.readyState === EventSource.CLOSED) {
        setTimeout(() => this.source === source && this.connect(), RETRY_MS);
      }
    };
  }

  // Resolves once the stream is open: the server subscribed to our channel before answering,
  // so an execution started after this cannot publish an event we miss.
  ready() {
    if (this.connected) return Promise.resolve();
    return new Promise((resolve) => this._waiters.push(resolve));
  }
}
