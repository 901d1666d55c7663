import { Component, type ReactNode } from "react";

/** Keeps one page's failure on that page: the dock and the other pages still work. */
export class ErrorBoundary extends Component<{ children: ReactNode; resetKey: string }, { error: Error | null }> {
  state: { error: Error | null } = { error: null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  componentDidUpdate(prev: { resetKey: string }) {
    if (prev.resetKey !== this.props.resetKey && this.state.error) this.setState({ error: null });
  }

  render() {
    if (!this.state.error) return this.props.children;
    return (
      <div className="empty" role="alert">
        <h3>This page stopped</h3>
        <div className="empty-body">
          <p>
            {this.state.error.message || String(this.state.error)}. The other pages still work; this one starts again when you come back
            to it.
          </p>
          <button type="button" className="btn" onClick={() => this.setState({ error: null })}>
            Try again
          </button>
        </div>
      </div>
    );
  }
}
