package rackpool.bench.cloudsim;

import ch.qos.logback.classic.Level;
import org.cloudsimplus.allocationpolicies.VmAllocationPolicy;
import org.cloudsimplus.allocationpolicies.VmAllocationPolicyBestFit;
import org.cloudsimplus.allocationpolicies.VmAllocationPolicyFirstFit;
import org.cloudsimplus.allocationpolicies.VmAllocationPolicySimple;
import org.cloudsimplus.brokers.DatacenterBroker;
import org.cloudsimplus.brokers.DatacenterBrokerSimple;
import org.cloudsimplus.core.CloudSimEntity;
import org.cloudsimplus.core.CloudSimPlus;
import org.cloudsimplus.core.CloudSimTag;
import org.cloudsimplus.core.Simulation;
import org.cloudsimplus.core.events.SimEvent;
import org.cloudsimplus.datacenters.DatacenterSimple;
import org.cloudsimplus.hosts.Host;
import org.cloudsimplus.hosts.HostSimple;
import org.cloudsimplus.resources.Pe;
import org.cloudsimplus.resources.PeSimple;
import org.cloudsimplus.util.Log;
import org.cloudsimplus.vms.Vm;
import org.cloudsimplus.vms.VmSimple;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Replays a rackpool VM-request trace in CloudSim Plus 8.5.7 and prints one JSON
 * object with the acceptance count and wall time. See README.md for the exact
 * mapping of rackpool's semantics onto CloudSim Plus.
 *
 * <p>Mechanics (all verified against the 8.5.7 sources):
 * <ul>
 * <li>Each request is a {@link VmSimple} submitted up front with
 *     {@code submissionDelay = arrival}; the broker sends one VM_CREATE_ACK
 *     request per VM to the datacenter at time 0 + arrival, in file order
 *     ({@code --submit dynamic}: a {@link Feeder} entity submits each instant's VMs
 *     to the running broker at exactly that instant instead).</li>
 * <li>The broker's retry of failed VMs is disabled ({@code VmCreation.retryDelay = 0}),
 *     so a VM that finds no host goes to the failed list for good.</li>
 * <li>No Cloudlets. A VM is destroyed by CloudSim's own datacenter VM-destroy
 *     handler ({@code processVmDestroy}) from an event scheduled, when the VM is
 *     created, at creation time + hold. With the default {@code release-first}
 *     order that event carries a private tag (30) that sorts before
 *     VM_CREATE_ACK (32) at the same instant; {@code --same-instant arrival-first}
 *     uses CloudSim's own VM_DESTROY tag (33), which sorts after it.</li>
 * <li>Acceptance is counted in the datacenter right after CloudSim processed
 *     the creation request, from {@code vm.isCreated()}.</li>
 * </ul>
 */
public final class Replay {
    static final String PEER = "cloudsimplus-8.5.7";
    /** Private event tag for a VM release: unused by CloudSim Plus 8.5.7 and lower than VM_CREATE_ACK. */
    static final int RELEASE_FIRST_TAG = 30;
    static final double PE_MIPS = 1000;
    /** Bandwidth and storage are given so much room that they never decide a placement. */
    static final long HOST_BW = 1_000_000_000_000L;
    static final long HOST_STORAGE = 1_000_000_000_000L;
    static final long VM_BW = 1;
    static final long VM_STORAGE = 1;

    record Request(String id, double arrival, int cores, long ramMb, double hold) {}

    static final class UsageException extends Exception {
        UsageException(String msg) { super(msg); }
    }

    static final class Options {
        Path trace;
        int hosts = -1;
        int hostCores = -1;
        double hostRamGb = -1;
        String policy;
        Path acceptedIds;
        boolean releaseFirst = true;
        boolean dynamic;
        boolean check;
    }

    static final String USAGE = """
        usage: Replay --trace FILE --hosts N --host-cores C --host-ram-gb R
                      --policy first-fit|next-fit|best-fit|worst-fit
                      [--accepted-ids FILE] [--submit delay|dynamic]
                      [--same-instant release-first|arrival-first] [--check]
        """;

    public static void main(String[] args) {
        Log.setLevel(Level.OFF);
        final Options opt;
        try {
            opt = parseArgs(args);
        } catch (UsageException e) {
            System.err.println("cloudsim-replay: " + e.getMessage());
            System.err.print(USAGE);
            System.exit(2);
            return;
        }
        try {
            System.out.println(run(opt));
        } catch (TraceException e) {
            System.err.println("cloudsim-replay: " + e.getMessage());
            System.exit(1);
        } catch (java.nio.file.NoSuchFileException e) {
            System.err.println("cloudsim-replay: no such file: " + e.getMessage());
            System.exit(1);
        } catch (IOException e) {
            System.err.println("cloudsim-replay: " + e);
            System.exit(1);
        }
    }

    static Options parseArgs(String[] args) throws UsageException {
        final var o = new Options();
        for (int i = 0; i < args.length; i++) {
            final String a = args[i];
            if (a.equals("-h") || a.equals("--help")) {
                System.out.print(USAGE);
                System.exit(0);
            }
            if (a.equals("--check")) { o.check = true; continue; }
            String name = a, value;
            final int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                name = a.substring(0, eq);
                value = a.substring(eq + 1);
            } else {
                if (i + 1 >= args.length) throw new UsageException("missing value for " + a);
                value = args[++i];
            }
            switch (name) {
                case "--trace" -> o.trace = Path.of(value);
                case "--hosts" -> o.hosts = positiveInt(name, value);
                case "--host-cores" -> o.hostCores = positiveInt(name, value);
                case "--host-ram-gb" -> {
                    o.hostRamGb = parseDouble(name, value);
                    if (!(o.hostRamGb > 0) || Double.isInfinite(o.hostRamGb))
                        throw new UsageException(name + " must be a positive number, got '" + value + "'");
                }
                case "--policy" -> {
                    if (!List.of("first-fit", "next-fit", "best-fit", "worst-fit").contains(value))
                        throw new UsageException("--policy must be first-fit, next-fit, best-fit or worst-fit, got '" + value + "'");
                    o.policy = value;
                }
                case "--accepted-ids" -> o.acceptedIds = Path.of(value);
                case "--submit" -> {
                    switch (value) {
                        case "delay" -> o.dynamic = false;
                        case "dynamic" -> o.dynamic = true;
                        default -> throw new UsageException("--submit must be delay or dynamic, got '" + value + "'");
                    }
                }
                case "--same-instant" -> {
                    switch (value) {
                        case "release-first" -> o.releaseFirst = true;
                        case "arrival-first" -> o.releaseFirst = false;
                        default -> throw new UsageException("--same-instant must be release-first or arrival-first, got '" + value + "'");
                    }
                }
                default -> throw new UsageException("unknown argument '" + a + "'");
            }
        }
        if (o.trace == null) throw new UsageException("--trace is required");
        if (o.hosts < 0) throw new UsageException("--hosts is required");
        if (o.hostCores < 0) throw new UsageException("--host-cores is required");
        if (o.hostRamGb < 0) throw new UsageException("--host-ram-gb is required");
        if (o.policy == null) throw new UsageException("--policy is required");
        if (o.dynamic && !o.releaseFirst)
            throw new UsageException("--submit dynamic always releases first at the same instant; --same-instant arrival-first needs --submit delay");
        return o;
    }

    private static int positiveInt(String name, String v) throws UsageException {
        try {
            final int n = Integer.parseInt(v.trim());
            if (n <= 0) throw new NumberFormatException();
            return n;
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be a positive integer, got '" + v + "'");
        }
    }

    private static double parseDouble(String name, String v) throws UsageException {
        try {
            return Double.parseDouble(v.trim());
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be a number, got '" + v + "'");
        }
    }

    /** GB to CloudSim's MB: round(gb * 1024) (half up), for hosts and VMs alike. */
    static long gbToMb(double gb) {
        return Math.round(gb * 1024.0);
    }

    // ---------------------------------------------------------------- trace

    static final class TraceException extends Exception {
        TraceException(Path file, long line, String msg) { super(file + ":" + line + ": " + msg); }
    }

    static List<Request> readTrace(Path file) throws IOException, TraceException {
        final var out = new ArrayList<Request>();
        final Set<String> ids = new HashSet<>();
        try (BufferedReader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String line;
            long lineNo = 0;
            Map<String, Integer> col = null;
            int ncols = 0;
            double lastArrival = Double.NEGATIVE_INFINITY;
            while ((line = r.readLine()) != null) {
                lineNo++;
                if (lineNo == 1 && !line.isEmpty() && line.charAt(0) == '\uFEFF') line = line.substring(1);
                if (line.isBlank()) continue;
                final List<String> f = splitCsv(line, file, lineNo);
                if (col == null) {
                    col = new HashMap<>();
                    for (int i = 0; i < f.size(); i++) {
                        final String h = f.get(i).trim().toLowerCase(Locale.ROOT);
                        if (col.putIfAbsent(h, i) != null)
                            throw new TraceException(file, lineNo, "duplicate column '" + h + "' in header");
                    }
                    for (String need : List.of("id", "arrival", "cores", "ram_gb", "hold")) {
                        if (!col.containsKey(need))
                            throw new TraceException(file, lineNo,
                                "header lacks column '" + need + "' (need id,arrival,cores,ram_gb,hold; got '" + line.trim() + "')");
                    }
                    ncols = f.size();
                    continue;
                }
                if (f.size() != ncols)
                    throw new TraceException(file, lineNo, "expected " + ncols + " fields like the header, got " + f.size());
                final String id = f.get(col.get("id")).trim();
                if (id.isEmpty()) throw new TraceException(file, lineNo, "empty id");
                if (!ids.add(id)) throw new TraceException(file, lineNo, "duplicate id '" + id + "'");
                final double arrival = num(f, col, "arrival", file, lineNo);
                final double coresD = num(f, col, "cores", file, lineNo);
                final double ramGb = num(f, col, "ram_gb", file, lineNo);
                final double hold = num(f, col, "hold", file, lineNo);
                if (arrival < 0) throw new TraceException(file, lineNo, "arrival must be >= 0, got " + arrival);
                if (arrival < lastArrival)
                    throw new TraceException(file, lineNo, "rows must be sorted by arrival: " + arrival + " after " + lastArrival);
                lastArrival = arrival;
                if (coresD < 1 || coresD != Math.rint(coresD) || coresD > Integer.MAX_VALUE)
                    throw new TraceException(file, lineNo, "cores must be a positive integer, got '" + f.get(col.get("cores")).trim() + "'");
                if (ramGb < 0) throw new TraceException(file, lineNo, "ram_gb must be >= 0, got " + ramGb);
                if (hold < 0) throw new TraceException(file, lineNo, "hold must be >= 0, got " + hold);
                out.add(new Request(id, arrival, (int) coresD, gbToMb(ramGb), hold));
            }
            if (col == null) throw new TraceException(file, Math.max(lineNo, 1), "empty trace: header required (id,arrival,cores,ram_gb,hold)");
        }
        return out;
    }

    private static double num(List<String> f, Map<String, Integer> col, String name, Path file, long lineNo) throws TraceException {
        final String s = f.get(col.get(name)).trim();
        try {
            final double v = Double.parseDouble(s);
            if (Double.isNaN(v) || Double.isInfinite(v)) throw new NumberFormatException();
            return v;
        } catch (NumberFormatException e) {
            throw new TraceException(file, lineNo, name + " is not a finite number: '" + s + "'");
        }
    }

    /** Minimal RFC 4180 field splitter for one line (quoted fields may hold commas, "" is a quote). */
    static List<String> splitCsv(String line, Path file, long lineNo) throws TraceException {
        final var out = new ArrayList<String>();
        final var sb = new StringBuilder();
        boolean quoted = false, wasQuoted = false;
        for (int i = 0; i < line.length(); i++) {
            final char c = line.charAt(i);
            if (quoted) {
                if (c == '"') {
                    if (i + 1 < line.length() && line.charAt(i + 1) == '"') { sb.append('"'); i++; }
                    else quoted = false;
                } else sb.append(c);
            } else if (c == '"' && sb.toString().isBlank() && !wasQuoted) {
                quoted = true; wasQuoted = true; sb.setLength(0);
            } else if (c == ',') {
                out.add(sb.toString()); sb.setLength(0); wasQuoted = false;
            } else sb.append(c);
        }
        if (quoted) throw new TraceException(file, lineNo, "unterminated quoted field");
        out.add(sb.toString());
        return out;
    }

    // ----------------------------------------------------------- simulation

    /**
     * DatacenterSimple that (1) records which VMs CloudSim actually created and
     * (2) schedules each created VM's destruction at creation time + hold and
     * hands it to CloudSim's own {@code processVmDestroy}.
     */
    static final class ReplayDatacenter extends DatacenterSimple {
        private final double[] hold;
        private final boolean[] created;
        private final int releaseTag;
        int accepted;
        int destroyed;
        int creationClockMismatches;
        private final double[] arrival;

        ReplayDatacenter(Simulation sim, List<Host> hosts, VmAllocationPolicy policy,
                         double[] arrival, double[] hold, boolean releaseFirst) {
            super(sim, hosts, policy);
            this.arrival = arrival;
            this.hold = hold;
            this.created = new boolean[hold.length];
            this.releaseTag = releaseFirst ? RELEASE_FIRST_TAG : CloudSimTag.VM_DESTROY;
        }

        @Override
        public void processEvent(final SimEvent evt) {
            if (evt.getTag() == releaseTag) {
                final Vm vm = (Vm) evt.getData();
                if (vm.isCreated()) destroyed++;
                if (releaseTag != CloudSimTag.VM_DESTROY) {
                    processVmDestroy(evt);
                    return;
                }
            }
            super.processEvent(evt);
            if (evt.getTag() == CloudSimTag.VM_CREATE_ACK && evt.getData() instanceof Vm vm && vm.isCreated()) {
                final int i = (int) vm.getId();
                if (!created[i]) {
                    created[i] = true;
                    accepted++;
                    if (getSimulation().clock() != arrival[i]) creationClockMismatches++;
                    schedule(this, hold[i], releaseTag, vm);
                }
            }
        }

        boolean wasCreated(int i) { return created[i]; }
    }

    /**
     * {@code --submit dynamic}: instead of submitting every VM at time 0 with a
     * submission delay, this entity wakes up at each distinct arrival time and
     * submits that instant's VMs (file order) to the running broker, which sends
     * their creation requests with no delay. Avoids the broker's per-ack scans of
     * a waiting list that holds every not-yet-arrived VM (quadratic in trace size).
     */
    static final class Feeder extends CloudSimEntity {
        static final int FEED_TAG = 1; // unused by CloudSim Plus 8.5.7
        private final DatacenterBroker broker;
        private final List<Vm> vms;
        private final double[] arrival;

        Feeder(Simulation sim, DatacenterBroker broker, List<Vm> vms, double[] arrival) {
            super(sim);
            this.broker = broker;
            this.vms = vms;
            this.arrival = arrival;
        }

        @Override
        protected void startInternal() {
            // All wake-ups are scheduled now, at clock 0, so each fires at exactly 0 + arrival
            // (rescheduling later with delay = arrival - clock could be off by one ulp).
            // Arrivals at time 0 were submitted before the simulation started: at time 0 the broker
            // has not yet received the datacenter list, so it could not place a submission then.
            int first = 0;
            while (first < vms.size() && arrival[first] == 0) first++;
            for (int i = first; i < vms.size(); ) {
                int end = i;
                while (end < vms.size() && arrival[end] == arrival[i]) end++;
                schedule(this, arrival[i], FEED_TAG, new int[]{i, end});
                i = end;
            }
        }

        @Override
        public void processEvent(final SimEvent evt) {
            if (evt.getTag() != FEED_TAG) return;
            final int[] range = (int[]) evt.getData();
            broker.submitVmList(new ArrayList<>(vms.subList(range[0], range[1])));
        }
    }

    static VmAllocationPolicy policy(String name) {
        return switch (name) {
            // True first-fit: lowest-index suitable host, every time.
            case "first-fit" -> new VmAllocationPolicySimple(Replay::lowestIndexSuitableHost);
            // CloudSim Plus's "FirstFit" is next-fit: starts at the host it used last (see README).
            case "next-fit" -> new VmAllocationPolicyFirstFit();
            case "best-fit" -> new VmAllocationPolicyBestFit();
            case "worst-fit" -> new VmAllocationPolicySimple();
            default -> throw new IllegalArgumentException(name);
        };
    }

    static Optional<Host> lowestIndexSuitableHost(VmAllocationPolicy p, Vm vm) {
        final List<Host> hosts = p.getHostList();
        for (int i = 0, n = hosts.size(); i < n; i++) {
            final Host h = hosts.get(i);
            if (h.isSuitableForVm(vm)) return Optional.of(h);
        }
        return Optional.empty();
    }

    static String run(Options opt) throws IOException, TraceException {
        final long t0 = System.nanoTime();
        final List<Request> reqs = readTrace(opt.trace);
        final long t1 = System.nanoTime();

        final int n = reqs.size();
        final double[] arrival = new double[n];
        final double[] hold = new double[n];
        for (int i = 0; i < n; i++) { arrival[i] = reqs.get(i).arrival(); hold[i] = reqs.get(i).hold(); }

        final var sim = new CloudSimPlus();
        final long hostRamMb = gbToMb(opt.hostRamGb);
        final var hosts = new ArrayList<Host>(opt.hosts);
        for (int h = 0; h < opt.hosts; h++) {
            final var pes = new ArrayList<Pe>(opt.hostCores);
            for (int c = 0; c < opt.hostCores; c++) pes.add(new PeSimple(PE_MIPS));
            // HostSimple defaults: VmSchedulerSpaceShared (a VM owns its PEs), simple RAM/BW provisioners,
            // active from datacenter start-up, never shut down when idle.
            hosts.add(new HostSimple(hostRamMb, HOST_BW, HOST_STORAGE, pes));
        }
        final var dc = new ReplayDatacenter(sim, hosts, policy(opt.policy), arrival, hold, opt.releaseFirst);

        final DatacenterBroker broker = new DatacenterBrokerSimple(sim);
        broker.setShutdownWhenIdle(false);
        broker.getVmCreation().setRetryDelay(0);   // isRetryFailedVms() == false: rejected forever
        broker.getVmCreation().setMaxRetries(0);

        final var vms = new ArrayList<Vm>(n);
        for (int i = 0; i < n; i++) {
            final Request q = reqs.get(i);
            final var vm = new VmSimple(i, (long) PE_MIPS, q.cores());
            vm.setRam(q.ramMb()).setBw(VM_BW).setSize(VM_STORAGE);
            if (!opt.dynamic) vm.setSubmissionDelay(q.arrival());
            vms.add(vm);
        }
        if (opt.dynamic) {
            int zero = 0;
            while (zero < n && arrival[zero] == 0) zero++;
            if (zero > 0) broker.submitVmList(new ArrayList<>(vms.subList(0, zero)));
            new Feeder(sim, broker, vms, arrival);
        }
        else broker.submitVmList(vms);
        final long t2 = System.nanoTime();

        sim.start();
        final long t3 = System.nanoTime();

        if (opt.check) {
            final int brokerCreated = broker.getVmCreatedList().size();
            final int brokerFailed = broker.getVmFailedList().size();
            final int stillCreated = (int) vms.stream().filter(Vm::isCreated).count();
            final PrintStream e = System.err;
            e.printf("check: accepted=%d destroyed=%d still_created=%d broker_created=%d broker_failed=%d " +
                     "broker_waiting=%d creation_clock_mismatches=%d final_clock=%s%n",
                accepted(dc), dc.destroyed, stillCreated, brokerCreated, brokerFailed,
                broker.getVmWaitingList().size(), dc.creationClockMismatches, sim.clock());
        }

        if (opt.acceptedIds != null) {
            try (BufferedWriter w = Files.newBufferedWriter(opt.acceptedIds, StandardCharsets.UTF_8)) {
                for (int i = 0; i < n; i++) {
                    if (dc.wasCreated(i)) { w.write(reqs.get(i).id()); w.write('\n'); }
                }
            }
        }

        final double wall = (t3 - t0) / 1e9;
        final int a = accepted(dc);
        return String.format(Locale.ROOT,
            "{\"peer\":\"%s\",\"policy\":\"%s\",\"hosts\":%d,\"host_cores\":%d,\"host_ram_gb\":%s," +
            "\"requests\":%d,\"accepted\":%d,\"acceptance_ratio\":%s,\"wall_seconds\":%.6f," +
            "\"read_seconds\":%.6f,\"build_seconds\":%.6f,\"sim_seconds\":%.6f,\"same_instant\":\"%s\",\"submit\":\"%s\"}",
            PEER, opt.policy, opt.hosts, opt.hostCores, jsonNum(opt.hostRamGb),
            n, a, n == 0 ? "0" : jsonNum((double) a / n), wall,
            (t1 - t0) / 1e9, (t2 - t1) / 1e9, (t3 - t2) / 1e9,
            opt.releaseFirst ? "release-first" : "arrival-first", opt.dynamic ? "dynamic" : "delay");
    }

    private static int accepted(ReplayDatacenter dc) { return dc.accepted; }

    private static String jsonNum(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e15) return Long.toString((long) v);
        return Double.toString(v);
    }
}
