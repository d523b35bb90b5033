package httpapi

import "testing"

func TestDashboardURL(t *testing.T) {
	for _, tt := range []struct{ listen, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080/"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080/"},
		{":9090", "http://127.0.0.1:9090/"},
		{"[::]:8080", "http://127.0.0.1:8080/"},
		{"[::1]:8080", "http://[::1]:8080/"},
		{"localhost:8080", "http://localhost:8080/"},
		{"bot.example.com:443", "http://bot.example.com:443/"},
	} {
		if got := DashboardURL(tt.listen); got != tt.want {
			t.Errorf("DashboardURL(%q) = %q, want %q", tt.listen, got, tt.want)
		}
	}
}
