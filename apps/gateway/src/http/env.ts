/** The Hono variables every gateway route may read: the request id, and the authenticated client. */
export type GatewayEnvVars = { Variables: { requestId: string; clientId: string } };
