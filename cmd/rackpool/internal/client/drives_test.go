package client

import "testing"

func TestNbdURI(t *testing.T) {
	if got := NBDURI("10.0.0.3:10809", "ssd1@t"); got != "nbd://10.0.0.3:10809/ssd1@t" {
		t.Error(got)
	}
	if got := NBDURI("nbds://10.0.0.3:10809", "ssd1@t"); got != "nbds://10.0.0.3:10809/ssd1@t" {
		t.Error(got)
	}
}
