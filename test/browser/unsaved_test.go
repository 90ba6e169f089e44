package browser

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/degraded/degraded/controller"
)

// fullDisk is a state file on a disk with no room left while full is set:
// it loads what a daemon killed at Major saved, and every save fails with
// ENOSPC.
type fullDisk struct{ full *atomic.Bool }

func (fullDisk) Load() (*controller.Persisted, bool, error) {
	at := time.Now().Add(-time.Minute).UTC()
	return &controller.Persisted{Version: 1, Level: "Major", Index: 3, Since: at, Reason: "error_rate 12.00% > 10% (Major)",
		Auto: "Major", AutoIndex: 3, AutoSince: at, Sequence: 7, SequenceCeiling: 1007}, false, nil
}

func (d fullDisk) Save(*controller.Persisted) error {
	if d.full.Load() {
		return fmt.Errorf("write state: write /var/lib/degraded/.state-1.json: %w", syscall.ENOSPC)
	}
	return nil
}

// TestDashboardSaysTheStateIsNotSaved: a daemon restarted on a full disk
// serves the state its file saved, held. The dashboard shows the level
// with a STATE NOT SAVED banner saying why and that nothing on the page
// can change; once the disk has room the banner goes, without a reload.
func TestDashboardSaysTheStateIsNotSaved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	full := new(atomic.Bool)
	full.Store(true)
	d := startDaemonOn(t, "", fullDisk{full})
	if !d.ctrl.Held() {
		t.Fatal("the daemon started on a full disk is not held")
	}

	p := openBrowser(t, time.Minute)
	p.do("open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	p.waitFor("the badge shows the saved level", text("level-name", "Major"), 10*time.Second)
	p.waitFor("the STATE NOT SAVED banner is shown", `!document.getElementById('unsaved').hidden &&
		document.getElementById('unsaved').getBoundingClientRect().height > 0 &&
		document.getElementById('unsaved-heading').textContent === 'STATE NOT SAVED'`, 5*time.Second)
	p.waitFor("it names the cause", contains("unsaved-error", "no space left on device"), 2*time.Second)
	p.waitFor("it says the page is held", contains("unsaved-then", "HELD: the level, its signals and overrides shown here cannot change"), 2*time.Second)

	full.Store(false) // the operator makes room
	p.waitFor("the banner goes once a save succeeds", `document.getElementById('unsaved').hidden`, 5*time.Second)
	if d.ctrl.Held() {
		t.Error("still held after the disk had room")
	}
	if probs := p.problems(); len(probs) > 0 {
		t.Errorf("the page reported problems: %v", probs)
	}
}
