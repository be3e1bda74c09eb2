package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/internal/twin"
)

// peakAt is when the trace first reaches its highest demand.
func peakAt(tr twin.Trace) time.Duration {
	var at time.Duration
	best := -1.0
	for _, p := range tr.Points {
		if p.Demand > best {
			best, at = p.Demand, p.At
		}
	}
	return at
}

// waitScaled waits until the load has reached the trace's peak and then
// every cluster's shop/web has settled above one replica: the same
// desired count, all of them Ready, for settle. It fails after limit.
func waitScaled(ctx context.Context, twins []*twin.Twin, load *twin.Load, tr twin.Trace, settle, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if wait := peakAt(tr) - load.Elapsed(); wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	var last []int32
	var since time.Time
	for {
		now, err := replicas(ctx, twins)
		switch {
		case err != nil:
			last = nil
		case !slices.Equal(now, last):
			last, since = now, time.Now()
		case time.Since(since) >= settle:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the clusters did not settle after a scale-up (replicas %v): %w", last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// replicas is every cluster's desired replica count of shop/web, or an
// error when one is at one replica or has desired replicas not yet Ready.
func replicas(ctx context.Context, twins []*twin.Twin) ([]int32, error) {
	out := make([]int32, len(twins))
	for i, tw := range twins {
		d, err := tw.Cluster.Client().AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		n := *d.Spec.Replicas
		if n <= 1 || d.Status.ReadyReplicas != n || d.Status.Replicas != n {
			return nil, errors.New("not settled")
		}
		out[i] = n
	}
	return out, nil
}

// capture drives a headless Chromium through the console at consoleURL,
// signed in with token, and writes dir/twin-targets.png (the list, which
// must show every cluster's shop/web) and dir/twin-target.png (cluster
// a's shop/web, whose chart must show a rescale).
func capture(ctx context.Context, consoleURL, token string, clusters []string, dir string) error {
	path, err := exec.LookPath("chromium")
	if err != nil {
		return errors.New("-screenshot needs Debian's chromium (make chromium)")
	}
	profile, err := os.MkdirTemp("", "setpoint-twin-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// The console's certificate is from the twin's own CA, on loopback.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1440, 900),
	)
	defer cancelAlloc()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(browser); err != nil {
		return fmt.Errorf("start chromium: %w", err)
	}

	want := make([]string, len(clusters))
	for i, c := range clusters {
		want[i] = c + "/shop/web"
	}
	list := func(ctx context.Context) error {
		if err := step(ctx, "the targets list", chromedp.WaitVisible("#targets tr[data-key]")); err != nil {
			return err
		}
		expr := fmt.Sprintf(`document.querySelectorAll('#targets tr[data-key]').length >= %d`, len(want))
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			return fmt.Errorf("the list did not show %d targets: %w", len(want), err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#targets tr[data-key]')].map(r => r.dataset.key)`))
		if err != nil {
			return err
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("the list shows %v, want %v", got, want)
		}
		return nil
	}
	if err := page(browser, consoleURL, token, "/?sort=name", list, filepath.Join(dir, "twin-targets.png")); err != nil {
		return err
	}
	chart := func(ctx context.Context) error {
		if err := step(ctx, "the chart", chromedp.WaitVisible(".replicas-chart .decision-point"), chromedp.WaitVisible(".replicas-chart .rescale-marker")); err != nil {
			return err
		}
		return step(ctx, "live updates", chromedp.WaitVisible("#live:not(.off)"))
	}
	return page(browser, consoleURL, token, "/t/"+clusters[0]+"/shop/web", chart, filepath.Join(dir, "twin-target.png"))
}

// page opens a tab of browser on the console's route (after "#"), signs in
// with token, runs ready (which checks the page shows what it should) and
// writes the whole page as a PNG to file.
func page(browser context.Context, consoleURL, token, route string, ready func(context.Context) error, file string) error {
	tab, cancel := chromedp.NewContext(browser)
	defer cancel()
	// The tab lives as long as the context of its first action: that one
	// has no timeout.
	if err := chromedp.Do(tab); err != nil {
		return fmt.Errorf("open a tab: %w", err)
	}
	if err := step(tab, "sign in",
		chromedp.Navigate(consoleURL+"#"+route),
		chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token),
		chromedp.Click(`#login button[type=submit]`),
		chromedp.WaitNotPresent("#login"),
	); err != nil {
		return err
	}
	if err := ready(tab); err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot of %s: %w", route, err)
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("twin: wrote %s (%s)\n", file, route)
	return nil
}

// step runs actions in the tab within 30 s; on failure the error holds
// what the page shows.
func step(tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		dctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body.innerText`))
		return fmt.Errorf("%s: %w\npage text:\n%s", what, err, text)
	}
	return nil
}
