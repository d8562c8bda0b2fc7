// Experiment (not part of the build): what CloudSim Plus 8.5.7 does with Vm.setLifeTime alone.
// One host with one PE; five 1-PE VMs with lifetimes. Run after ./run.sh has built the jar:
//
//   java -cp ../target/cloudsim-replay-all.jar NativeLifetime.java none      # lifetime only
//   java -cp ../target/cloudsim-replay-all.jar NativeLifetime.java interval  # + Datacenter schedulingInterval 1
//   java -cp ../target/cloudsim-replay-all.jar NativeLifetime.java cloudlet  # + one endless Cloudlet per VM
//
// Result with 8.5.7 (see README.md): without Cloudlets a VM with a lifetime is never destroyed
// before the simulation ends; with a Cloudlet per VM it is destroyed at the next processing update
// after its lifetime, which can be much later (hold 1.0 -> destroyed 20.1 time units late).
import org.cloudsimplus.allocationpolicies.*;
import org.cloudsimplus.brokers.*;
import org.cloudsimplus.core.*;
import org.cloudsimplus.datacenters.*;
import org.cloudsimplus.hosts.*;
import org.cloudsimplus.resources.*;
import org.cloudsimplus.vms.*;
import org.cloudsimplus.cloudlets.*;
import org.cloudsimplus.utilizationmodels.*;
import org.cloudsimplus.util.Log;
import ch.qos.logback.classic.Level;
import java.util.*;

public class NativeLifetime {
  // mode: none | interval | cloudlet ; one host with 1 PE; VMs of 1 PE
  public static void main(String[] a) {
    Log.setLevel(Level.OFF);
    String mode = a[0];
    double[][] reqs = {{0, 5.3}, {6.0, 2.5}, {7.0, 10.25}, {20.0, 1.0}, {21.0, 3.0}}; // arrival, hold
    var sim = new CloudSimPlus();
    var host = new HostSimple(1_000_000, 1_000_000_000L, 1_000_000_000L, List.of(new PeSimple(1000)));
    var dc = new DatacenterSimple(sim, List.of(host), new VmAllocationPolicySimple());
    if (mode.equals("interval")) dc.setSchedulingInterval(1);
    var broker = new DatacenterBrokerSimple(sim);
    broker.setShutdownWhenIdle(false);
    broker.getVmCreation().setRetryDelay(0);
    var vms = new ArrayList<Vm>(); var cls = new ArrayList<Cloudlet>();
    for (int i = 0; i < reqs.length; i++) {
      var vm = new VmSimple(i, 1000, 1); vm.setRam(1).setBw(1).setSize(1);
      vm.setSubmissionDelay(reqs[i][0]); vm.setLifeTime(reqs[i][1]);
      vms.add(vm);
      if (mode.equals("cloudlet")) {
        var c = new CloudletSimple(i, -1, 1); c.setUtilizationModelCpu(new UtilizationModelFull());
        c.setSizes(1); c.setVm(vm); c.setSubmissionDelay(reqs[i][0]); cls.add(c);
      }
    }
    broker.submitVmList(vms);
    if (!cls.isEmpty()) broker.submitCloudletList(cls);
    sim.terminateAt(60);
    sim.start();
    for (var vm : vms) System.out.printf("%s vm%d arrival=%.2f hold=%.2f start=%.3f finish=%.3f created_list=%b failed=%b%n",
        mode, vm.getId(), reqs[(int)vm.getId()][0], reqs[(int)vm.getId()][1], vm.getStartTime(), vm.getFinishTime(),
        broker.getVmCreatedList().contains(vm), vm.isFailed());
  }
}
