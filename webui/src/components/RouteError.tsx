import { isRouteErrorResponse, useRouteError } from 'react-router';

/** Shown instead of a blank screen when a page fails to render or its code
 * cannot be loaded (e.g. the console was redeployed under an open tab). */
export function RouteError() {
  const err = useRouteError();
  const text = isRouteErrorResponse(err)
    ? `${String(err.status)} ${err.statusText}`
    : err instanceof Error
      ? err.message
      : String(err);
  return (
    <div className="page" role="alert">
      <h1>This page failed</h1>
      <p className="error">{text}</p>
      <p>
        <button type="button" className="primary" onClick={() => { window.location.reload(); }}>Reload</button>{' '}
        <a href="/">Back to live sessions</a>
      </p>
    </div>
  );
}
