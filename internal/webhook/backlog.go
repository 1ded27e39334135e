package webhook

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// PendingDeliveries counts the deliveries waiting for an attempt.
func PendingDeliveries(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`); err != nil {
		return 0, fmt.Errorf("webhook: unable to count pending deliveries: %w", err)
	}
	return n, nil
}
