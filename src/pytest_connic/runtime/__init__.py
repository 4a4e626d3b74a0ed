"""One invocation of an agent: its state, the lifecycle, agent kinds, dispatch, mocks, approvals,
guardrails, children, local predefined tools, and the ports it reaches the outside through."""
