package tmpdeps

import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/chromedp/chromedp"
	_ "github.com/coder/websocket"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
)
