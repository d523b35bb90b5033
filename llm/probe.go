package llm

import (
	"context"
	"net/http"
)

// Probe checks that the model server answers, with GET {base_url}/models
// and no retries, for readiness checks. A server that answers but has no
// /models route (404, 405) is reachable; a rejected key (401, 403), a
// server error or a network failure is an *Error saying so.
func (c *Client) Probe(ctx context.Context) error {
	_, err := c.Models(ctx)
	return err
}

// Models lists the model ids the server offers (GET {base_url}/models, no
// retries). A server without that route gives nil and no error.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	list, err := c.api.ListModels(ctx)
	if err != nil {
		e := c.classify(ctx, ctx, c.cfg.Model, err, &captured{}, false)
		if le, ok := e.(*Error); ok && (le.Status == http.StatusNotFound || le.Status == http.StatusMethodNotAllowed) {
			return nil, nil
		}
		return nil, e
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
